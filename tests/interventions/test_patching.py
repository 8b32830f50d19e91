"""Patching: each head's clean output copied into the corrupted run; the grid agrees with one full pass per head."""

import pytest
import torch

from attnviz.engines import registry
from attnviz.interventions import patching

CLEAN = "When Anna and Peter went to the market, Peter handed the basket to"
CORRUPT = "When Anna and Peter went to the market, Anna handed the basket to"


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    hf = registry.load(str(tiny_llama_dir), "hf", "cpu")
    return hf, registry.scratch_engine(hf)


def _words(engine):
    """Two one-token words of the tiny model's (BERT's) vocabulary."""
    return "anna", "peter"


@pytest.mark.parametrize("backend", [0, 1])
def test_restoring_every_head_at_once_restores_the_clean_difference(tiny, backend):
    engine = tiny[backend]
    answer, wrong = _words(engine)
    every = {layer: list(range(engine.n_heads)) for layer in range(engine.n_layers)}
    assert patching.restore(engine, CLEAN, CORRUPT, answer, wrong, every) == pytest.approx(1.0, abs=1e-4)
    assert patching.restore(engine, CLEAN, CORRUPT, answer, wrong, {}) == pytest.approx(0.0, abs=1e-6)


def test_the_grid_equals_one_full_pass_per_head_and_both_backends_agree(tiny):
    hf, ours = tiny
    answer, wrong = _words(hf)
    grids = [patching.patch(e, CLEAN, CORRUPT, answer, wrong, require_flip=False) for e in (hf, ours)]
    a, b = grids
    assert a.restored.shape == (2, 6)
    assert abs(a.clean_diff - b.clean_diff) < 1e-4 and abs(a.corrupt_diff - b.corrupt_diff) < 1e-4
    assert (a.restored - b.restored).abs().max() < 1e-3
    for layer, head in ((0, 2), (1, 5)):
        one = patching.restore(hf, CLEAN, CORRUPT, answer, wrong, {layer: [head]})
        assert a.restored[layer, head].item() == pytest.approx(one, abs=1e-4)


def test_by_position_sums_a_head_s_share_over_its_positions_at_the_last_one(tiny):
    hf, _ = tiny
    answer, wrong = _words(hf)
    grid = patching.patch(hf, CLEAN, CORRUPT, answer, wrong, require_flip=False)
    per = patching.by_position(hf, CLEAN, CORRUPT, answer, wrong, 1, 3)
    assert per.shape == (len(hf.encode(CLEAN).ids),)
    # in the last layer only the last position's output reaches the last position's logits
    assert per[-1].item() == pytest.approx(grid.restored[1, 3].item(), abs=1e-4)
    assert torch.all(per[:-1].abs() < 1e-4)


def test_a_pair_the_model_does_not_get_right_both_ways_has_no_share_restored(tiny):
    hf, _ = tiny
    got = patching.patch(hf, CLEAN, CORRUPT, "anna", "peter")
    assert not (got.clean_diff > 0 > got.corrupt_diff) and not got.flips and got.restored is None


def test_the_pronoun_lab_s_pairs_become_continuations_that_ask_for_the_answer():
    pairs = patching.pronoun_pairs()
    clean, corrupt, answer, wrong = pairs["pronoun: The animal didn't cross the street because it was too tired."]
    assert clean.endswith("tired. The word 'it' means the") and corrupt.endswith("wide. The word 'it' means the")
    assert (answer, wrong) == (" animal", " street") and len(pairs) == 22


def test_prompts_of_different_lengths_or_a_many_token_answer_are_refused_with_a_reason(tiny):
    hf, _ = tiny
    with pytest.raises(ValueError, match="same length in tokens"):
        patching.patch(hf, CLEAN, CLEAN + " again", "anna", "peter")
    with pytest.raises(ValueError, match="is 2 tokens here|is 3 tokens here"):
        patching.patch(hf, CLEAN, CORRUPT, "anna peter", "peter")
    for clean, corrupt, name in ((CLEAN, " ", "corrupted"), ("", CORRUPT, "clean")):  # which one, not "the text"
        with pytest.raises(ValueError, match=f"the {name} prompt is empty"):
            patching.patch(hf, clean, corrupt, "anna", "peter")
