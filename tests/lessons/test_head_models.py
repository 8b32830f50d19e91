"""The head-count models: the task, the held-out set, and the shipped checkpoints' stated accuracies."""

import json

import pytest
import torch

from attnviz.cli import main
from attnviz.lessons import head_models


def test_the_tasks_answers():
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]])
    assert head_models.answer(ids, "reversal").tolist() == [[2, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1]]
    # (x_{i-1} + x_{11-i}) mod 10, x_{-1} = 0
    assert head_models.answer(ids, "mirror-sum").tolist() == [[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]]
    with pytest.raises(ValueError, match="unknown task"):
        head_models.answer(ids, "copy-paste")


def test_held_out_is_fixed_distinct_and_never_trained_on():
    a, b = head_models.held_out(), head_models.held_out()
    assert torch.equal(a, b) and a.shape == (head_models.HELD_OUT_N, head_models.LENGTH)
    assert len({tuple(r) for r in a.tolist()}) == head_models.HELD_OUT_N
    excluded = {tuple(r) for r in a.tolist()[:50]}
    gen = torch.Generator().manual_seed(0)
    batch = head_models.training_batch(gen, 500, excluded)
    assert not excluded & {tuple(r) for r in batch.tolist()}


@pytest.mark.parametrize("task", head_models.TASKS)
def test_shipped_checkpoints_reproduce_their_stated_accuracies(task, tmp_path):
    out = tmp_path / "eval.json"
    assert main(["eval-heads", "--task", task, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    stated = {m["heads"]: m for m in head_models.shipped(task)["models"]}
    assert result["task"] == task and [m["heads"] for m in result["models"]] == [1, 2, 4, 8]
    for m in result["models"]:
        assert m["accuracy"] == pytest.approx(stated[m["heads"]]["accuracy"], abs=1e-4)
        assert m["sequence_accuracy"] == pytest.approx(stated[m["heads"]]["sequence_accuracy"], abs=1e-4)
        assert m["steps"] == stated[m["heads"]]["steps"] == head_models.recipe_for(task).steps


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_mirror_sum_needs_more_than_one_head():
    """What the README says of the shipped models: one head cannot do two look-ups; two heads can."""
    acc = {m["heads"]: m["accuracy"] for m in head_models.held_out_accuracy("mirror-sum")["models"]}
    assert acc[1] < 0.5 and acc[2] > 0.95
    rev = {m["heads"]: m["accuracy"] for m in head_models.held_out_accuracy("reversal")["models"]}
    assert min(rev.values()) > 0.99


def test_lookup_shares_read_the_positions_the_answer_needs():
    t = head_models.LENGTH
    w = torch.zeros(2, t, t)
    for i in range(t):
        w[0, i, t - 1 - i] = 1.0  # head 1: the mirror
        w[1, i, max(i - 1, 0)] = 1.0  # head 2: the previous token (the first token itself)
    shares = head_models.lookup_shares(w)
    assert shares["mirror"].tolist() == [1.0, pytest.approx(1 / t)]
    assert shares["previous"].tolist() == [pytest.approx(1 / (t - 1)), 1.0]
    assert shares["self"].tolist() == [0.0, pytest.approx(1 / t)]


def test_one_head_reversal_model_reads_the_mirror():
    model = head_models.TinyEncoder.load(head_models.folder_of("reversal"), head_models.name(1))
    answer, weights = head_models.attention_on(model, head_models.sample_digits())
    assert (
        answer.tolist()
        == head_models.answer(head_models.parse_digits(head_models.sample_digits())[None], "reversal")[0].tolist()
    )
    assert head_models.lookup_shares(weights[0])["mirror"].item() > 0.5


def test_typed_digits_are_checked():
    assert head_models.parse_digits("3 1 4 1 5 9 2 6 5 3 5 8").tolist() == [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
    with pytest.raises(ValueError, match="exactly 12"):
        head_models.parse_digits("123")
    with pytest.raises(ValueError, match="digits 0-9"):
        head_models.parse_digits("12345678901a")


@pytest.mark.slow  # trains a model twice
def test_training_is_seeded_and_learns(tmp_path):
    recipe = head_models.HeadRecipe(steps=200, eval_every=100)
    a = head_models.train_all("reversal", recipe, tmp_path / "a", head_counts=(1,), log=lambda *_: None)
    b = head_models.train_all("reversal", recipe, tmp_path / "b", head_counts=(1,), log=lambda *_: None)
    assert a["models"][0]["curve"]["train_loss"] == b["models"][0]["curve"]["train_loss"]
    curve = a["models"][0]["curve"]
    assert curve["steps"] == [1, 100, 200]
    assert curve["held_out_accuracy"][-1] > curve["held_out_accuracy"][0] + 0.3
