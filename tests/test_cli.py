"""The command line: the exact --json layout and the exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, SENTENCE

from attnviz.cli import main


def test_json_layout_is_exact(tmp_path, bundled_hf):
    out = tmp_path / "a.json"
    assert main(["attention", SENTENCE, "--json", str(out), "--device", "cpu"]) == 0
    d = json.loads(out.read_text())
    assert list(d) == ["model", "backend", "device", "truncated", "max_tokens", "results"]
    assert (d["model"], d["backend"], d["device"], d["truncated"], d["max_tokens"]) == ("default", "hf", "cpu", 0, 512)
    r = d["results"]["self"]
    assert list(r) == ["kind", "target_tokens", "source_tokens", "target_pieces", "source_pieces", "weights"]
    w = torch.tensor(r["weights"])
    assert w.shape == (6, 12, 16, 16)
    assert torch.allclose(w, bundled_hf.run(bundled_hf.encode(SENTENCE))["self"].weights)


def test_scratch_backend_from_the_command_line(tmp_path, bundled_hf):
    out = tmp_path / "s.json"
    assert main(["attention", SENTENCE, "--backend", "scratch", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["backend"] == "scratch"
    w = torch.tensor(d["results"]["self"]["weights"])
    assert (w - bundled_hf.run(bundled_hf.encode(SENTENCE))["self"].weights).abs().max() < 1e-5


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


def _main(capsys, *args) -> tuple[int, str, str]:
    """The command line in this process: (exit code, stdout, stderr). argparse's own errors exit 2 by SystemExit; any
    other exception fails the test, as a traceback on stderr would. `python -m attnviz` itself (sys.exit of main's code,
    nothing else on stderr) is run in a fresh Python once, by test_bad_input_exits_2_with_one_line_and_no_traceback."""
    try:
        code = main(list(args))
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the command line in a fresh Python, once
def test_bad_input_exits_2_with_one_line_and_no_traceback(capsys):
    p = _run("attention", "   ")  # python -m attnviz: main's code is the process's, and stderr holds one line
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p
    assert "error" in p.stderr.lower()
    for args in (["attention", "   "], ["attention", "hi", "--model", "no-such/model-xyz"], ["attention"]):
        code, _, err = _main(capsys, *args)
        assert code == 2 and "Traceback" not in err and "error" in err.lower(), (args, code, err)
    assert _main(capsys, "attention", "   ")[2].strip().count("\n") == 0


def test_a_json_file_in_no_folder_or_a_target_for_a_model_with_no_decoder_is_refused(tmp_path, capsys):
    """Both went through: the first after the whole computation, with "[Errno 2] No such file or directory"; the
    second with the target unread and not a word said. Each is one line now, the first before a model loads."""
    out = tmp_path / "no such folder" / "out.json"
    code, said, err = _main(capsys, "attention", "hi", "--json", str(out))
    assert code == 2 and err.strip() == f"attnviz: error: cannot write {out}: there is no folder {out.parent}", err
    assert said == "" and not out.parent.exists()  # nothing computed, nothing made
    code, _, err = _main(capsys, "attention", "hi", "--target", "salut")
    assert code == 2 and "--target is the decoder's text of an encoder-decoder" in err and "default has none" in err


@pytest.mark.slow  # the command line in a fresh Python
def test_doctor_reports_versions_models_and_a_passing_check():
    p = _run("doctor", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    for needle in ("torch", "transformers", "streamlit", "CUDA", "models offline", "default", "max |diff|", "(ok,"):
        assert needle in p.stdout, needle
    assert "long texts    the fused statistics pass: attnviz's CPU kernel" in p.stdout  # this machine has a cc


def test_doctor_runs_where_streamlit_is_not_installed(monkeypatch, capsys):
    """A GPU host with only the library (the device machine has no streamlit): doctor says so, and still checks."""
    import importlib.metadata

    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "streamlit":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setitem(sys.modules, "streamlit", None)  # importing it fails, as where it is not installed
    assert main(["doctor", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "streamlit     not installed" in out and "(ok," in out
    from attnviz import __version__

    # every bundled model it can load offline (doctor listed only "default" after prepare set up SmolLM2), and its own
    # version
    assert f"attnviz       {__version__}" in out
    models = out.split("models offline:\n")[1].split("attention ")[0]
    assert [line.split()[0] for line in models.splitlines()[:3]] == ["default", "dates", "smollm2"], models


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
    assert list(d) == ["model", "truncated", "max_tokens", "tokens", "stats", "labels"] and len(d["tokens"]) == 16
    assert (d["truncated"], d["max_tokens"]) == (0, 512)
    assert set(d["stats"]) == {
        "entropy",
        "distance",
        "cls",
        "sep",
        "punct",
        "prev",
        "next",
        "self",
        "confidence",
        "first",
    }
    assert all(torch.tensor(v).shape == (6, 12) for v in d["stats"].values())
    assert len(d["labels"]) == 6 and all(len(r) == 12 for r in d["labels"])


@pytest.mark.parametrize("command", ["attention", "stats", "rollout"])
@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_text_past_the_models_limit_is_cut_and_every_command_says_so(tmp_path, capsys, command):
    """stats and rollout kept BERT's first 512 tokens of a longer text with no word of it and no field in their
    JSON (attention said so): each prints the note and writes how many tokens were dropped."""
    out = tmp_path / "c.json"
    rows = ["--rows", "0"] if command == "attention" else []  # one row: every weight of 512 tokens is 19M numbers
    assert main([command, "word " * 600, "--json", str(out), *rows]) == 0
    d = json.loads(out.read_text())
    assert (d["truncated"], d["max_tokens"]) == (602 - 512, 512)  # 600 words and [CLS], [SEP]
    assert "note: the text was cut to 512 tokens; 90 tokens were dropped" in capsys.readouterr().out
    if command != "attention":
        assert len(d["tokens"]) == 512


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_rollout_json_layout(tmp_path):
    out = tmp_path / "r.json"
    assert main(["rollout", "The cat sat on the mat.", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert list(d) == ["model", "truncated", "max_tokens", "tokens", "rollout", "flow"] and d["truncated"] == 0
    assert torch.tensor(d["rollout"]).shape == (6, 9, 9) and torch.tensor(d["flow"]).shape == (9, 9)
    assert torch.allclose(torch.tensor(d["rollout"]).sum(-1), torch.ones(6, 9), atol=1e-5)


def _cases_file(tmp_path, cases):
    path = tmp_path / "c.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"text": c.text, "pronoun": c.pronoun, "candidates": list(c.candidates), "answer": c.answer})
            for c in cases
        )
    )
    return path


def test_pronouns_json_layout(tmp_path):
    from attnviz.analysis.pronoun_cases import LESSON

    out = tmp_path / "p.json"
    assert (
        main(["pronouns", "--cases", str(_cases_file(tmp_path, LESSON[:4])), "--limit", "3", "--json", str(out)]) == 0
    )
    d = json.loads(out.read_text())
    assert list(d) == [
        "model",
        "method",
        "n",
        "accuracy",
        "chance",
        "ties",
        "head_ties",
        "best_head",
        "held_out_best_head",
        "permutation_best_head",
        "skipped",
        "cases",
    ]
    assert d["n"] == 3 and d["method"] == "mas" and d["chance"] == 0.5
    assert list(d["best_head"]) == ["layer", "head", "accuracy", "picked_on"]
    c = d["cases"][0]
    assert list(c) == [
        "text",
        "pronoun",
        "pronoun_at",
        "candidates",
        "answer",
        "predicted",
        "correct",
        "tie",
        "head_ties",
        "scores",
    ]
    assert torch.tensor(c["scores"]).shape == (6, 12, 2)


def _authors_mas(scores: np.ndarray) -> np.ndarray:
    """computeMaximumAttentionScore, as SAP-samples/acl2019-commonsense writes it, over (L, H, C)."""
    res = np.zeros(scores.shape[2])
    for layer in range(scores.shape[0]):
        for head in range(scores.shape[1]):
            res[np.argmax(scores[layer, head])] += np.max(scores[layer, head])
    return res / res.sum()


@pytest.mark.parametrize("method", ["mas", "vote"])
def test_pronoun_scores_are_raw_attention_read_in_the_method_s_direction(tmp_path, bundled_hf, method):
    from attnviz.analysis.pronoun_cases import LESSON

    cases = LESSON[:6]
    out = tmp_path / "p.json"
    assert main(["pronouns", "--cases", str(_cases_file(tmp_path, cases)), "--method", method, "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    right = 0
    for case, got in zip(cases, d["cases"], strict=True):
        with torch.no_grad():
            enc = bundled_hf.tokenizer.hf(case.text, return_tensors="pt")
            w = torch.stack(bundled_hf.model(**enc, output_attentions=True).attentions)[:, 0]  # (L, H, T, T)
        toks = bundled_hf.tokenizer.hf.convert_ids_to_tokens(enc["input_ids"][0])
        p = toks.index(case.pronoun.lower())
        cols = [toks.index(c.lower()) for c in case.candidates]  # one-piece words in the lesson
        expected = w[:, :, cols, p] if method == "mas" else w[:, :, p, cols]  # (L, H, C)
        scores = np.array(got["scores"])
        assert np.abs(scores - expected.numpy()).max() < 1e-4
        if method == "mas":
            predicted = int(np.argmax(_authors_mas(scores)))
        else:
            votes = np.bincount(scores.argmax(-1).ravel(), minlength=len(case.candidates))
            tied = np.flatnonzero(votes == votes.max())
            predicted = int(tied[np.argmax(scores.sum((0, 1))[tied])])  # a tie in votes: the larger summed score
            assert got["tie"] == (len(tied) > 1)
        assert got["predicted"] == case.candidates[predicted]
        right += got["predicted"] == case.answer
    assert d["accuracy"] == right / len(cases)


def test_pronouns_with_a_broken_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.xml"
    bad.write_text("<collection><schema>")
    code, _, err = _main(capsys, "pronouns", "--cases", str(bad))
    assert code == 2 and err.strip().count("\n") == 0, err


def test_pronouns_with_no_scorable_case_exits_2_with_the_reason(tmp_path, capsys):
    cases = tmp_path / "none.jsonl"
    cases.write_text(
        json.dumps({"text": "A cat and a dog.", "pronoun": "it", "candidates": ["cat", "dog"], "answer": "cat"})
    )
    assert main(["pronouns", "--cases", str(cases)]) == 2
    assert "none of the 1 cases could be scored" in capsys.readouterr().err


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
@pytest.mark.parametrize("backend", ["hf", "scratch"])
def test_smollm2_from_the_command_line_is_causal_and_equals_raw_eager(tmp_path, smollm2_hf, smollm2_eager, backend):
    out = tmp_path / "s.json"
    assert main(["attention", SENTENCE, "--model", "smollm2", "--backend", backend, "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    r = d["results"]["causal"]
    w = torch.tensor(r["weights"])
    assert list(d["results"]) == ["causal"] and w.shape == (30, 9, len(r["target_tokens"]), len(r["target_tokens"]))
    assert r["target_tokens"][:2] == ["The", "animal"] and r["target_pieces"][:2] == ["The", "Ġanimal"]
    with torch.no_grad():
        ids = torch.tensor([smollm2_hf.tokenizer.hf(SENTENCE)["input_ids"]])
        raw = torch.stack(smollm2_eager(input_ids=ids, output_attentions=True).attentions)[:, 0]
    assert (w - raw).abs().max() < 1e-4


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_rollout_on_a_decoder_says_why_every_token_draws_from_the_first(smollm2_hf, capsys):
    """Every token "draws most from 'The' (1.00)" after SmolLM2's last layer: the command now says why, with the mean
    share measured; on BERT, an encoder, it says nothing of the kind."""
    assert main(["rollout", "The cat sat on the mat.", "--model", "smollm2"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1].startswith("note: on a decoder, rollout pools on the first token (over 99.9% of a token's"), said
    assert main(["rollout", "The cat sat on the mat."]) == 0
    assert "pools on the first token" not in capsys.readouterr().out


@pytest.mark.slow  # loads SmolLM2 (about 20 s the first time)
def test_the_maximum_attention_score_on_smollm2_says_it_is_not_defined(tmp_path, capsys):
    assert main(["pronouns", "--cases", "lesson", "--limit", "2", "--model", "smollm2", "--method", "mas"]) == 2
    assert "not defined for a causal model" in capsys.readouterr().err
    assert main(["pronouns", "--cases", "lesson", "--limit", "2", "--model", "smollm2", "--method", "vote"]) == 0


LONG = "The animal didn't cross the street because it was too tired. " * 40  # about 560 tokens


def test_a_text_from_a_file_equals_the_same_text_as_an_argument(tmp_path):
    path, a, b = tmp_path / "t.txt", tmp_path / "a.json", tmp_path / "b.json"
    path.write_text(SENTENCE, encoding="utf-8")
    assert main(["attention", "--file", str(path), "--json", str(a)]) == 0
    assert main(["attention", SENTENCE, "--json", str(b)]) == 0
    assert json.loads(a.read_text()) == json.loads(b.read_text())


def test_file_and_text_together_or_a_file_that_is_not_text_exit_2(tmp_path, capsys):
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00\x81 not utf-8")
    bad = (
        ["attention", "hi", "--file", str(binary)],
        ["stats", "--file", str(binary)],
        ["attention", "--file", str(tmp_path / "missing.txt")],
        ["attention", "hi", "--rows", "1,x"],
    )
    for args in bad:
        code, _, err = _main(capsys, *args)
        assert code == 2 and "Traceback" not in err and err.strip().count("\n") == 0, (args, code, err)


def test_rows_are_the_exact_rows_of_every_weight(tmp_path, bundled_hf):
    out = tmp_path / "r.json"
    assert main(["attention", SENTENCE, "--rows", "0,5,15", "--json", str(out)]) == 0
    r = json.loads(out.read_text())["results"]["self"]
    assert r["rows"] == [0, 5, 15]
    assert torch.allclose(
        torch.tensor(r["weights"]), bundled_hf.run(bundled_hf.encode(SENTENCE))["self"].weights[:, :, [0, 5, 15]]
    )
    assert main(["attention", SENTENCE, "--rows", "16", "--json", str(out)]) == 2  # 16 tokens: 0 to 15


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_long_text_writes_exact_rows_and_refuses_every_weight(tmp_path, tiny_long_llama_dir, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # the tiny Llama goes lazy past 147 tokens
    from attnviz.engines import registry

    engine = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    path, out = tmp_path / "long.txt", tmp_path / "r.json"
    path.write_text(LONG, encoding="utf-8")
    n = len(engine.encode(LONG).ids)
    assert n > 400
    assert main(["attention", "--file", str(path), "--model", str(tiny_long_llama_dir), "--json", str(out)]) == 2
    rows = [0, 1, n // 2, n - 1]
    args = ["attention", "--file", str(path), "--model", str(tiny_long_llama_dir), "--json", str(out)]
    assert main([*args, "--rows", ",".join(map(str, rows))]) == 0
    r = json.loads(out.read_text())["results"]["causal"]
    with torch.inference_mode():
        w = engine.weights_of(engine.encode(LONG).ids)  # every weight, the eager way
    assert r["rows"] == rows and len(r["target_tokens"]) == n
    assert (torch.tensor(r["weights"]) - w[:, :, rows]).abs().max() < 1e-5


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_stats_of_a_long_text_are_exact_and_carry_the_first_token_share(
    tmp_path, tiny_long_llama_dir, monkeypatch, capsys
):
    from attnviz.analysis.head_stats import STATS, head_stats
    from attnviz.engines import registry
    from attnviz.result import AttentionResult

    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")
    engine = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    path, out = tmp_path / "long.txt", tmp_path / "s.json"
    path.write_text(LONG, encoding="utf-8")
    assert main(["stats", "--file", str(path), "--model", str(tiny_long_llama_dir), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    enc = engine.encode(LONG)
    with torch.inference_mode():
        ref = head_stats(AttentionResult(engine.weights_of(enc.ids), enc.axis, enc.axis, "causal", "tiny"))
    assert set(d["stats"]) == set(STATS) and "first" in d["stats"]
    for key in STATS:
        got, want = torch.tensor(d["stats"][key]), ref[key]
        assert ((got - want).abs() / want.abs().clamp_min(1)).max() < 1e-5, key
    capsys.readouterr()
    code, _, err = _main(capsys, "rollout", "--file", str(path), "--model", str(tiny_long_llama_dir))
    assert code == 2 and "stats command takes any length" in err, err


# --- interventions: induction, ablate, patch (tiny Llama: the formats and both backends' numbers) ---

IOI = "When Anna and Peter went to the market, Peter handed the basket to"
IOI_CORRUPT = "When Anna and Peter went to the market, Anna handed the basket to"


def _interventions_json(tmp_path, folder, backend) -> dict:
    model = ["--model", str(folder), "--backend", backend]
    out = {name: tmp_path / f"{name}-{backend}.json" for name in ("induction", "ablate", "patch")}
    assert main(["induction", *model, "--length", "8", "--seed", "2", "--json", str(out["induction"])]) == 0
    assert main(["ablate", IOI, "--heads", "0.1,1.4", "--mode", "mean", *model, "--json", str(out["ablate"])]) == 0
    assert (
        main(
            [
                "patch",
                "--clean",
                IOI,
                "--corrupt",
                IOI_CORRUPT,
                "--answer",
                "anna",
                "--wrong",
                "peter",
                *model,
                "--json",
                str(out["patch"]),
            ]
        )
        == 0
    )
    return {name: json.loads(path.read_text()) for name, path in out.items()}


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_induction_ablate_and_patch_write_their_json_and_both_backends_agree(tmp_path, tiny_llama_dir):
    hf, ours = (_interventions_json(tmp_path, tiny_llama_dir, b) for b in ("hf", "scratch"))
    ind, ab, pa = hf["induction"], hf["ablate"], hf["patch"]
    assert set(ind) == {
        "model",
        "tokens",
        "length",
        "batch",
        "loss",
        "induction",
        "prefix",
        "duplicate",
        "induction_sd",
        "prefix_sd",
        "duplicate_sd",
    }
    assert ind["length"] == 8 and len(ind["loss"]) == len(ind["tokens"]) - 1 and len(ind["induction"]) == 2
    assert ind["batch"] == 10 and len(ind["induction_sd"]) == 2  # ARENA's batch of 10 sequences, averaged
    assert ab["heads"] == [[0, 1], [1, 4]] and ab["mode"] == "mean" and len(ab["loss_after"]) == len(ab["tokens"]) - 1
    assert {"model", "heads", "mode", "tokens", "loss_before", "loss_after", "top_before", "top_after"} <= set(ab)
    assert {"model", "clean_diff", "corrupt_diff", "flips", "restored"} <= set(pa)
    assert ab["truncated"] == 0 and pa["truncated"] == [0, 0] and ab["max_tokens"] == pa["max_tokens"] > 0
    assert pa["flips"] is False and pa["restored"] is None  # a random model does not get the pair right both ways
    # the same numbers through the same hook names on the scratch backend
    assert max(abs(a - b) for a, b in zip(ind["loss"], ours["induction"]["loss"], strict=True)) < 1e-4
    assert max(abs(a - b) for a, b in zip(ab["loss_after"], ours["ablate"]["loss_after"], strict=True)) < 1e-4
    assert abs(pa["clean_diff"] - ours["patch"]["clean_diff"]) < 1e-4


def test_patch_gives_the_rule_it_applies_when_the_share_restored_is_undefined(tmp_path, tiny_llama_dir, capsys):
    """The share is computed only where d clean > 0 > d corrupted; the line says that rule and both differences (it
    used to say the corrupted prompt did not change the difference, though it had)."""
    model = ["--model", str(tiny_llama_dir)]
    out = tmp_path / "patch.json"
    assert (
        main(
            [
                "patch",
                "--clean",
                IOI,
                "--corrupt",
                IOI_CORRUPT,
                "--answer",
                "anna",
                "--wrong",
                "peter",
                *model,
                "--json",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["restored"] is None and d["clean_diff"] != d["corrupt_diff"]
    assert "d clean > 0 > d corrupted" in printed and "does not change" not in printed
    assert f"d clean is {d['clean_diff']:+.2f}, d corrupted {d['corrupt_diff']:+.2f}" in printed


def test_interventions_print_heads_and_positions_1_based_and_take_heads_either_way(tmp_path, tiny_llama_dir, capsys):
    model = ["--model", str(tiny_llama_dir)]
    out = {k: tmp_path / f"{k}.json" for k in ("a", "b", "ind")}
    assert main(["ablate", IOI, "--heads", "0.1,1.4", *model, "--json", str(out["a"])]) == 0
    assert main(["ablate", IOI, "--heads", "L1H2,l2h5", *model, "--json", str(out["b"])]) == 0  # the pages' names
    a, b = (json.loads(out[k].read_text()) for k in "ab")
    assert a["heads"] == b["heads"] == [[0, 1], [1, 4]] and a["loss_after"] == b["loss_after"]  # JSON: 0-based
    printed = capsys.readouterr().out
    assert f"next token after token {len(a['tokens'])} (1-based)" in printed  # the last token, read as people count
    assert main(["induction", *model, "--length", "8", "--batch", "2", "--json", str(out["ind"])]) == 0
    printed = capsys.readouterr().out
    ind = json.loads(out["ind"].read_text())
    flat = [v for row in ind["induction"] for v in row]
    best = max(range(len(flat)), key=flat.__getitem__)
    n_h = len(ind["induction"][0])
    assert f"L{best // n_h + 1}H{best % n_h + 1} (1-based): induction" in printed and "0-based" not in printed
    assert main(["ablate", IOI, "--heads", "L3H1", *model]) == 2  # the tiny model has 2 layers
    assert "layers 1-2" in capsys.readouterr().err


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_interventions_on_bert_or_with_bad_heads_exit_2_with_one_line(capsys):
    assert main(["ablate", IOI, "--heads", "0.1", "--model", "default"]) == 2
    assert "decoder" in capsys.readouterr().err
    assert main(["ablate", IOI, "--heads", "zero"]) == 2
    assert "LAYER.HEAD" in capsys.readouterr().err


@pytest.mark.slow  # the whole WSC273 benchmark on BERT
def test_pronouns_on_wsc273_names_each_same_token_case_and_counts_ties_inside_heads(tmp_path, capsys, bundled_hf):
    wsc = ROOT.parent / "shared/data/winograd/WSCollection.xml"
    if not wsc.exists():
        pytest.skip(f"the Winograd collection is not at {wsc}")
    out = tmp_path / "p.json"
    assert main(["pronouns", "--cases", str(wsc), "--limit", "273", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skipped 10: candidates … and … land on the same tokens" in printed
    assert '2 x candidates "Joe" and "Joe\'s uncle" land on the same tokens ("joe")' in printed
    assert "heads had a tie at the top" in printed
    d = json.loads(out.read_text())
    assert d["n"] == 259 and d["head_ties"] == sum(c["head_ties"] for c in d["cases"])
    assert sum("same tokens" in s["reason"] for s in d["skipped"]) == 10


@pytest.mark.slow  # a corpus run of BERT
def test_corpus_runs_a_jsonl_column_writes_its_tables_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    import pandas as pd

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"review": t}) for t in ("A good film.", "Too long, and dull.", "")) + "\n")
    out = tmp_path / "run"
    code, stdout, err = _main(capsys, "corpus", str(data), "--text-column", "review", "--out", str(out))
    assert code == 0, err
    assert f"wrote {out}: 2 windows" in stdout and "(1 skipped: see manifest.json)" in stdout
    assert "highest mean prev: L" in stdout  # heads as people name them
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["corpus"]["skipped"] == {"empty": 1}
    assert len(pd.read_parquet(out / "heads.parquet")) == 10 * 6 * 12
    (tmp_path / "empty").mkdir()
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" * 100)
    for args, message in (
        ([str(data)], "has a field 'text'; its fields: review"),
        ([str(tmp_path / "empty")], "holds no .txt files"),
        ([str(tmp_path / "blob.bin")], "is not a corpus attnviz reads"),
        ([str(data), "--text-column", "review", "--out", str(out), "--window", "32"], "holds another run"),
    ):
        code, _, err = _main(capsys, "corpus", *args)
        assert code == 2 and "Traceback" not in err, err
        assert err.strip().count("\n") == 0 and message in err, err
    assert json.loads((out / "manifest.json").read_text()) == manifest  # the finished run is untouched


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_serve_sets_what_it_has_loaded_aside_from_the_collectors_full_passes():
    """`serve` freezes what it loaded before the server opens (gc.freeze): a full collection under a class's load
    walked it all and stopped every page for about 0.4 s (bench/RESULTS.md); what pages make later is collected."""
    import gc

    from attnviz.cli.serving import settle_memory

    try:
        frozen = settle_memory()
        assert frozen == gc.get_freeze_count() > 10_000
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_the_corpus_bar_counts_the_rate_from_its_first_report_and_is_quiet_in_a_pipe(monkeypatch):
    """A resumed run starts at the fraction already done: the time left is from the rate since then."""
    import io

    from attnviz.cli import corpus_run

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert corpus_run.corpus_printer() is None  # a pipe: no bar
    clock = iter([0.0, 100.0, 110.0, 120.0])
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    monkeypatch.setattr(sys, "stderr", Terminal())
    report = corpus_run.corpus_printer()
    report(0.5, "batch 6 of 10")  # resumed halfway, at t = 100 s
    report(0.6, "batch 7 of 10")  # 0.1 in 10 s: 40 s left
    report(1.0, "done")
    out = sys.stderr.getvalue()
    assert "50.0% batch 6 of 10 · …" in out and "60.0% batch 7 of 10 · 40 s left" in out
    assert out.endswith("100.0% done · … (120 s)   \n")


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(
    not THP.exists() or "[madvise]" not in THP.read_text(),
    reason="huge pages here are given always or never, not on request: torch's switch changes nothing",
)
@pytest.mark.parametrize(("given", "huge"), [(None, True), ("0", False)])
@pytest.mark.slow  # a process that imports torch: about 3 s
def test_the_command_line_puts_large_tensors_on_huge_pages_unless_told_not_to(given, huge):
    """attnviz's processes (the server among them) ask for huge pages for large tensors: torch's THP_MEM_ALLOC_ENABLE,
    set before torch is imported. An operator's THP_MEM_ALLOC_ENABLE=0 stands."""
    code = (
        "import attnviz.cli, torch; x = torch.ones(2**25)\n"  # 128 MB
        "print(next(l for l in open('/proc/self/smaps_rollup') if l.startswith('AnonHugePages')).split()[1])"
    )
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if given is not None:
        env["THP_MEM_ALLOC_ENABLE"] = given
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    kb = int(out.stdout.split()[-1])
    assert (kb >= 64 * 1024) if huge else (kb == 0), kb
