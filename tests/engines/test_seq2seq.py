"""Our encoder-decoder on the scratch engine, and the shipped date model."""

import random

import pytest
import torch

from attnviz.engines import date_training, registry
from attnviz.engines.seq2seq import Seq2Seq, Seq2SeqConfig, batch_ids, train_step


@pytest.fixture(scope="module")
def date_engine():
    return registry.load("dates")


@pytest.mark.slow  # the date model on its held-out set
def test_shipped_checkpoint_meets_accuracy_and_alignment_targets(date_engine):
    ev = date_training.evaluate_dates(date_engine.model, n=1000, seed=12345)
    assert ev.exact >= 0.99, ev
    for field, (mass, _) in ev.alignment.items():
        assert mass >= 0.5, (field, ev)


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_few_training_steps_lower_the_loss():
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(chars=date_training.CHARS, d_model=32, num_heads=2, d_ff=64)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = date_training.sample(random.Random(0), 32, held_out=False)
    src = batch_ids(model.vocab, [e.source for e in batch])
    tgt = batch_ids(model.vocab, [e.target for e in batch])
    losses = [train_step(model, opt, src, tgt) for _ in range(15)]
    assert losses[-1] < 0.8 * losses[0]


def test_held_out_dates_never_appear_in_training():
    train = date_training.sample(random.Random(1), 2000, held_out=False)
    test = date_training.sample(random.Random(2), 500, held_out=True)
    assert not {e.target for e in train} & {e.target for e in test}


def test_examples_mark_their_fields():
    for e in date_training.sample(random.Random(3), 300, held_out=False):
        y, m, d = e.target.split("-")
        assert e.source[slice(*e.spans["year"])] in (y, y.upper())
        assert int(e.source[slice(*e.spans["day"])].lower().rstrip("stndrh")) == int(d)


def test_date_engine_gives_three_kinds_with_the_prediction_as_decoder_tokens(date_engine):
    res = date_engine.run(date_engine.encode("Nov 22, 2026"))
    assert set(res) == {"self", "causal", "cross"}
    assert date_engine.predict(["Nov 22, 2026"]) == ["2026-11-22"]
    tgt = res["causal"].target_tokens
    assert "".join(tgt[1:]) == "2026-11-22" and tgt[0] == "<s>"
    assert res["cross"].shape[2:] == (11, 13)  # <s> + 10 output characters x 12 input characters + </s>


def test_the_decoder_hides_the_future_in_its_raw_weights(date_engine):
    src = torch.tensor([date_engine.encode("Nov 22, 2026").ids])
    tgt_in = date_engine.model.greedy(src)
    with torch.no_grad():  # the model's own weights, before AttentionResult checks them
        memory, mask, w_enc = date_engine.model.encode(src)
        _, w_self, w_cross = date_engine.model.decode(tgt_in, memory, mask)
    assert all(torch.count_nonzero(torch.triu(w, 1)) == 0 for w in w_self)
    for w in (*w_enc, *w_self, *w_cross):
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:3]), atol=1e-5)


def test_date_engine_teacher_forces_a_given_target(date_engine):
    res = date_engine.run(date_engine.encode("Nov 22, 2026"), target="2026-11-22")
    assert "".join(res["cross"].target_tokens) == "<s>2026-11-22"


@pytest.mark.parametrize("text", ["the 3rd of march 1999", "saturday 22 november 2026", "Nov 22, 2026"])
def test_issue_examples(date_engine, text):
    expected = {"the 3rd of march 1999": "1999-03-03"}.get(text, "2026-11-22")
    assert date_engine.predict([text]) == [expected]


def test_the_prediction_can_be_read_back_from_the_decoder_tokens(date_engine):
    from attnviz.engines.seq2seq import decoded

    for text in ("22/11/2026", "the 3rd of march 1999"):
        assert decoded(date_engine.run(date_engine.encode(text))["causal"]) == date_engine.predict([text])[0]


def test_encode_matches_what_run_sees(date_engine):
    enc = date_engine.encode("Nov 22, 2026")
    assert enc.axis == date_engine.run(date_engine.encode("Nov 22, 2026"))["self"].source
    assert enc.axis.spans[4] == (4, 5) and enc.axis.special[-1] and enc.tokens[-1] == "</s>"
    assert date_engine.run(date_engine.encode("Nov 22, 2026"))["causal"].target.special[0]  # <s>
