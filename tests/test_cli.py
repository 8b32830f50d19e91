"""The command line: the exact --json layout and the exit codes."""

import json
import os
import subprocess
import sys

import torch
from conftest import ROOT, SENTENCE

from attnviz.__main__ import main


def test_json_layout_is_exact(tmp_path, bundled_hf):
    out = tmp_path / "a.json"
    assert main(["attention", SENTENCE, "--json", str(out), "--device", "cpu"]) == 0
    d = json.loads(out.read_text())
    assert list(d) == ["model", "backend", "device", "truncated", "results"]
    assert (d["model"], d["backend"], d["device"], d["truncated"]) == ("default", "hf", "cpu", 0)
    r = d["results"]["self"]
    assert list(r) == ["kind", "target_tokens", "source_tokens", "weights"]
    w = torch.tensor(r["weights"])
    assert w.shape == (6, 12, 16, 16)
    assert torch.allclose(w, bundled_hf.run(SENTENCE)["self"].weights)


def test_scratch_backend_from_the_command_line(tmp_path, bundled_hf):
    out = tmp_path / "s.json"
    assert main(["attention", SENTENCE, "--backend", "scratch", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["backend"] == "scratch"
    w = torch.tensor(d["results"]["self"]["weights"])
    assert (w - bundled_hf.run(SENTENCE)["self"].weights).abs().max() < 1e-5


def test_the_old_engine_flag_still_picks_the_backend(tmp_path):
    out = tmp_path / "e.json"
    assert main(["attention", "a b", "--engine", "scratch", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["backend"] == "scratch"


def test_encoder_decoder_from_the_command_line(tmp_path, tiny_marian_dir):
    out = tmp_path / "m.json"
    assert (
        main(["attention", "the cat", "--model", str(tiny_marian_dir), "--target", "die katze", "--json", str(out)])
        == 0
    )
    assert set(json.loads(out.read_text())["results"]) == {"self", "causal", "cross"}


def _run(*args):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "attnviz", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def test_bad_input_exits_2_with_one_line_and_no_traceback():
    for args in (["attention", "   "], ["attention", "hi", "--model", "no-such/model-xyz"], ["attention"]):
        p = _run(*args)
        assert p.returncode == 2, p
        assert "Traceback" not in p.stderr
        assert "error" in p.stderr.lower()
    assert _run("attention", "   ").stderr.strip().count("\n") == 0


def test_doctor_reports_versions_models_and_a_passing_check():
    p = _run("doctor", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    for needle in ("torch", "transformers", "streamlit", "CUDA", "models offline", "default", "max |diff|", "(ok,"):
        assert needle in p.stdout, needle


def test_date_model_from_the_command_line_gives_three_kinds(tmp_path):
    out = tmp_path / "d.json"
    assert main(["attention", "22/11/2026", "--model", "dates", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert set(d["results"]) == {"self", "causal", "cross"}
    assert "".join(d["results"]["cross"]["target_tokens"]) == "<s>2026-11-22"


def test_stats_json_layout(tmp_path):
    out = tmp_path / "s.json"
    assert main(["stats", SENTENCE, "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert list(d) == ["model", "tokens", "stats", "labels"] and len(d["tokens"]) == 16
    assert set(d["stats"]) == {"entropy", "distance", "cls", "sep", "punct", "prev", "next", "self", "confidence"}
    assert all(torch.tensor(v).shape == (6, 12) for v in d["stats"].values())
    assert len(d["labels"]) == 6 and all(len(r) == 12 for r in d["labels"])


def test_rollout_json_layout(tmp_path):
    out = tmp_path / "r.json"
    assert main(["rollout", "The cat sat on the mat.", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert list(d) == ["model", "tokens", "rollout", "flow"]
    assert torch.tensor(d["rollout"]).shape == (6, 9, 9) and torch.tensor(d["flow"]).shape == (9, 9)
    assert torch.allclose(torch.tensor(d["rollout"]).sum(-1), torch.ones(6, 9), atol=1e-5)


def test_pronouns_json_layout(tmp_path):
    cases = tmp_path / "c.jsonl"
    cases.write_text(
        "\n".join(
            json.dumps({"text": c.text, "pronoun": c.pronoun, "candidates": list(c.candidates), "answer": c.answer})
            for c in __import__("attnviz.analysis.pronouns", fromlist=["LESSON"]).LESSON[:4]
        )
    )
    out = tmp_path / "p.json"
    assert main(["pronouns", "--cases", str(cases), "--limit", "3", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert list(d) == ["model", "n", "accuracy", "chance", "best_head", "cases"] and d["n"] == 3
    assert list(d["best_head"]) == ["layer", "head", "accuracy"] and d["chance"] == 0.5
    c = d["cases"][0]
    assert list(c) == ["text", "pronoun", "candidates", "answer", "predicted", "correct", "scores"]
    assert torch.tensor(c["scores"]).shape == (6, 12, 2)


def test_pronouns_with_a_broken_file_exits_2(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<collection><schema>")
    assert _run("pronouns", "--cases", str(bad)).returncode == 2
