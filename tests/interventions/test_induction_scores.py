"""Induction heads: the repeated random sequence, ARENA's scores read from the patterns, and on SmolLM2 the drop."""

import pytest
import torch
from conftest import eager_reference

from attnviz.engines import registry
from attnviz.interventions import induction_scores as induction


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
    return hf, registry.scratch_engine(hf)


def test_the_sequence_is_seeded_random_tokens_repeated_twice(tiny):
    hf, _ = tiny
    ids, offset = induction.repeated_ids(hf, 10, seed=3)
    assert ids[offset : offset + 10] == ids[offset + 10 :] and len(ids) == offset + 20
    assert induction.repeated_ids(hf, 10, seed=3) == (ids, offset) != induction.repeated_ids(hf, 10, seed=4)
    assert not set(ids[offset:]) & set(hf.tokenizer.hf.all_special_ids)


def _eager_patterns(folder, ids) -> torch.Tensor:
    with torch.no_grad():
        out = eager_reference(folder)(input_ids=torch.tensor([list(ids)]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions])  # (L, H, T, T)


def test_the_scores_are_the_diagonals_of_transformers_own_eager_attention(tiny, tiny_llama_dir):
    hf, ours = tiny
    n = 12
    got = induction.run(hf, n, seed=1, batch=1)
    eager = _eager_patterns(tiny_llama_dir, got.ids)
    t = len(got.ids)
    rows = torch.arange(n - 1, t)
    expected = eager[:, :, rows, rows - (n - 1)].mean(-1)  # A[q, q - n + 1] over every q the diagonal has
    assert (got.induction - expected).abs().max() < 1e-5
    second = torch.arange(got.offset + n, t)
    assert len(second) == n
    assert (got.prefix - eager[:, :, second, second - (n - 1)].mean(-1)).abs().max() < 1e-5
    other = induction.run(ours, n, seed=1, batch=1)  # the scratch backend: the same numbers
    assert (other.induction - got.induction).abs().max() < 1e-5 and (other.loss - got.loss).abs().max() < 1e-4


def test_the_duplicate_score_takes_the_second_copy_s_queries_only(tiny, tiny_llama_dir):
    """ARENA's get_attn_scores(..., "duplicate"): the n queries of the second copy, each on the earlier occurrence of
    its own token; never a first-copy query (with a BOS token first, the whole diagonal would hold one on the BOS)."""
    hf, _ = tiny
    n = 12
    got = induction.run(hf, n, seed=2, batch=1)
    eager = _eager_patterns(tiny_llama_dir, got.ids)
    ids = torch.tensor(got.ids)
    dest = torch.arange(got.offset + n, got.offset + 2 * n)  # the second copy
    src = torch.arange(got.offset, got.offset + n)  # the first copy
    assert torch.equal(ids[dest], ids[src])  # each query's key is the same token, earlier
    expected = eager[:, :, dest, src].mean(-1)  # (L, H)
    assert (got.duplicate - expected).abs().max() < 1e-5
    # with a start token the old whole-diagonal mean differs: it adds query offset + n - 1 on key offset - 1
    patterns = got.patterns.clone()
    patterns = torch.cat([torch.zeros(*patterns.shape[:2], 1, patterns.shape[-1]), patterns], dim=2)
    patterns = torch.cat([torch.zeros(*patterns.shape[:3], 1), patterns], dim=3)  # a BOS row and column first
    patterns[:, :, n, 0] = 1.0  # the last first-copy query all on the BOS token, as an attention sink does
    _, _, dup = induction.scores(patterns, n, offset=got.offset + 1)
    assert (dup - expected).abs().max() < 1e-5  # the sink's entry is not in the score


def test_scores_are_averaged_over_a_batch_of_seeded_sequences(tiny, tiny_llama_dir):
    hf, _ = tiny
    n, batch = 8, 3
    got = induction.run(hf, n, seed=5, batch=batch)
    seqs, offset = induction.sequences(hf, n, seed=5, batch=batch)
    assert len({tuple(s) for s in seqs}) == batch and tuple(seqs[0]) == got.ids  # the first is the one drawn
    assert induction.repeated_ids(hf, n, 5) == (seqs[0], offset)  # the same first sequence for any batch
    each = [induction.scores(_eager_patterns(tiny_llama_dir, s), n, offset) for s in seqs]
    for i, name in enumerate(induction.SCORES):
        values = torch.stack([e[i] for e in each])  # (B, L, H)
        assert (getattr(got, name) - values.mean(0)).abs().max() < 1e-5
        assert (got.spread(name) - values.std(0)).abs().max() < 1e-5
    assert got.batch == batch and got.loss.shape == (len(got.ids) - 1,)
    assert induction.run(hf, n, seed=5, batch=1).batch == 1


def test_two_heads_are_separated_only_when_their_gap_exceeds_the_noise(tiny):
    hf, _ = tiny
    got = induction.run(hf, 8, seed=0, batch=4)
    each = {name: torch.zeros(4, 2, 2) for name in induction.SCORES}
    each["induction"][:, 0, 0] = torch.tensor([0.80, 0.81, 0.79, 0.80])
    each["induction"][:, 0, 1] = torch.tensor([0.50, 0.52, 0.49, 0.51])  # far below: separated
    each["induction"][:, 1, 0] = torch.tensor([0.83, 0.76, 0.82, 0.77])  # the same mean, noisy: not separated
    fake = induction.Induction(got.model, got.ids, got.length, got.offset, got.losses, each, got.patterns)
    assert fake.separated((0, 0), (0, 1))
    assert not fake.separated((0, 0), (1, 0))
    # two scores where two heads go: a message that says what it compares ("new(): invalid data type 'str'" before)
    with pytest.raises(ValueError, match=r"compares two heads, each \(layer, head\)"):
        fake.separated("induction", "prefix")
    with pytest.raises(ValueError, match="the scores are induction"):
        fake.separated((0, 0), (0, 1), score="copying")


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_smollm2_copies_the_second_copy_and_has_induction_heads(smollm2_hf):
    got = induction.run(smollm2_hf, 50, seed=0)
    assert got.second_copy_loss < got.first_copy_loss - 2.0  # nats: it copies
    layer, head, score = got.best(1)[0]
    assert score > induction.THRESHOLD
    # the best head's map has the offset diagonal: its second-copy rows peak n - 1 tokens back
    pattern = got.patterns[layer, head]
    second = range(got.offset + 50, len(got.ids))
    hits = sum(int(pattern[q].argmax()) == q - 49 for q in second)
    assert hits > 0.8 * 50
