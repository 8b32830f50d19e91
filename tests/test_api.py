"""The door (attnviz.api): what a notebook or a script calls, and the same numbers as the functions behind it."""

import subprocess
import sys

import pytest
import torch
from conftest import ROOT, SENTENCE

import attnviz
from attnviz.interventions import ablation, induction_scores, patching


def test_import_attnviz_is_light_and_names_the_door():
    code = "import sys, attnviz; print('torch' in sys.modules, sorted(attnviz.__all__))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    light, names = out.stdout.strip().split(" ", 1)
    assert light == "False"  # nothing heavy until a function is called
    for name in ("attention", "show", "induction", "importance", "ablate", "patch", "generate", "__version__"):
        assert name in names
    with pytest.raises(AttributeError):
        attnviz.no_such_thing  # noqa: B018


def test_attention_is_the_apps_request_path_and_kept(bundled_hf):
    first = attnviz.attention(SENTENCE)
    assert attnviz.attention(SENTENCE) is first  # the memo: a second call computes nothing
    assert (first.main.weights - bundled_hf.run(bundled_hf.encode(SENTENCE)).main.weights).abs().max() < 1e-6
    view = attnviz.show(SENTENCE, layer=1, head=2)
    assert view.result is first.main and (view.layer, view.head) == (1, 2)


def test_a_local_folder_of_ones_own_loads_through_the_door(tiny_llama_dir):
    """The door is for the person at this machine: any folder, not only a server's model folders."""
    got = attnviz.attention("a b c d", model=str(tiny_llama_dir))
    assert got.main.kind == "causal" and got.main.n_layers == 2


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_interventions_through_the_door_equal_the_functions(tiny_llama_dir):
    folder = str(tiny_llama_dir)
    eng = attnviz.engine(folder)
    ind = attnviz.induction(folder, length=6, batch=2)
    assert torch.equal(ind.induction, induction_scores.run(eng, 6, 0, 2).induction)
    text = "When Anna and Peter went to the market, Peter handed the basket to"
    ab = attnviz.ablate(text, "L1H2,L2H5", model=folder, mode="mean")
    assert ab.heads == {0: [1], 1: [4]}
    same = ablation.ablate(eng, text, {0: [1], 1: [4]}, "mean")
    assert torch.equal(ab.loss_after, same.loss_after)
    assert attnviz.ablate(text, [(0, 1), (1, 4)], model=folder, mode="mean").heads == ab.heads
    grid, _ = attnviz.importance(text, model=folder)
    assert torch.allclose(grid, ablation.importance(eng, text)[0])
    corrupt = text.replace("Peter handed", "Anna handed")
    pa = attnviz.patch(text, corrupt, "anna", "peter", model=folder)
    assert pa.clean_diff == pytest.approx(patching.patch(eng, text, corrupt, "anna", "peter").clean_diff)


def test_bad_input_through_the_door_is_a_clear_error(tiny_llama_dir):
    with pytest.raises(ValueError, match="show what"):
        attnviz.show()
    with pytest.raises(ValueError, match="decoder"):
        attnviz.induction("default")
    with pytest.raises(attnviz.ModelLoadError):
        attnviz.attention("a text", model="/no/such/folder/anywhere")
    with pytest.raises(ValueError, match="L<layer>H<head>|LAYER.HEAD"):
        attnviz.ablate("a b c", "first", model=str(tiny_llama_dir))
    with pytest.raises(ValueError, match="executor='ray'"):  # the keyword's old name says its new one
        attnviz.corpus(["a text"], engine="ray")
    with pytest.raises(ValueError, match=r"a corpus run's executor \(the command line's --engine\) is embedded or ray"):
        attnviz.corpus(["a text"], executor="spark")  # it named --engine alone, which a notebook has not
    with pytest.raises(TypeError, match=r"attnviz.corpus has no setting 'topp': its settings are .*\btop\b"):
        attnviz.corpus(["a text"], topp=3)  # Settings.__init__'s own words before


def test_the_doors_arguments_are_checked_whole_and_in_range_before_anything_runs(tiny_llama_dir):
    """Heads, positions, lengths and choices given to the door as a script or a notebook has them. Before: {99: [0]}
    knocked out a head that is not there (the loss unchanged, "L100H1" reported), {0: [-1]} the last head as "L1H0",
    position=999 read the 999 % n-th token, max_new_tokens=0 said the prompt filled the model's limit, a decoder
    given a target ignored it, and a string where a number or a bool goes failed deep inside, in torch's words."""
    folder, text = str(tiny_llama_dir), "When Anna and Peter went to the market"
    n = len(attnviz.engine(folder).encode(text).ids)
    assert attnviz.ablate(text, {"1": [0]}, model=folder).heads == {1: [0]}  # a JSON file's keys are strings
    for heads in ({9: [0]}, {0: [-1]}, [(0, 9)], [(-1, 0)]):
        with pytest.raises(ValueError, match=r"this model has layers 0-1 and heads 0-\d+ \(0-based\)"):
            attnviz.ablate(text, heads, model=folder)
    with pytest.raises(TypeError, match=r"a head is a whole number \(got 1\.0, a float\)"):
        attnviz.ablate(text, [(0, 1.0)], model=folder)
    assert attnviz.ablate(text, "0.1", model=folder, position=-n).position == 0
    for position in (n, -n - 1, 999):
        with pytest.raises(ValueError, match=f"position is 0-{n - 1} here .this text has {n} tokens"):
            attnviz.ablate(text, "0.1", model=folder, position=position)
    with pytest.raises(ValueError, match=r"max_new_tokens is how many tokens to write: 1 or more \(got 0\)"):
        attnviz.generate("Hi", model=folder, max_new_tokens=0)
    with pytest.raises(TypeError, match="max_new_tokens is a whole number"):
        attnviz.generate("Hi", model=folder, max_new_tokens=2.5)
    with pytest.raises(TypeError, match=r"chat is True or False \(got 'no'\)"):
        attnviz.generate("Hi", model=folder, max_new_tokens=2, chat="no")
    with pytest.raises(ValueError, match="has layers 0-1 and heads 0-5, 0-based .L1H1 to L2H6 as the pages name"):
        attnviz.qk_space(text, 2, 0, model=folder)  # it said "layers 1-2" of a 0-based argument
    with pytest.raises(TypeError, match=r"seed is a whole number \(got 'x', a str\)"):  # torch's RuntimeError
        attnviz.induction(folder, length=6, batch=1, seed="x")
    with pytest.raises(TypeError, match=r"length is a whole number \(got 3\.5"):  # torch's randint's TypeError
        attnviz.induction(folder, length=3.5, batch=1)
    with pytest.raises(ValueError, match="ablation is 'zero' or 'mean', not 'max'"):  # was KeyError: 0
        attnviz.importance(text, model=folder, mode="max")
    with pytest.raises(ValueError, match="target is the decoder's text of an encoder-decoder"):  # was ignored
        attnviz.attention(text, model=folder, target="a decoder's text")
    with pytest.raises(TypeError, match=r"projector is True or False \(got 'yes'\)"):  # was KeyError: 'yes'
        attnviz.show(text, model=folder, projector="yes")


def test_a_text_that_is_not_a_string_is_named_at_the_door(tiny_llama_dir):
    """Before: a list of texts failed in the memo as "unhashable type: 'list'" (attention, ablate, importance), and
    show read one as a tuple of tensors ("could not convert string to float: 'a'")."""
    folder, many = str(tiny_llama_dir), ["one text", "another"]
    one_at_a_time = r"text is a string \(got a list\) \(one text at a time: .*attnviz.corpus\(texts\)"
    for call in (
        lambda: attnviz.attention(many, model=folder),
        lambda: attnviz.show(many, model=folder),
        lambda: attnviz.show(text=many, model=folder),
        lambda: attnviz.ablate(many, "0.1", model=folder),
        lambda: attnviz.importance(many, model=folder),
        lambda: attnviz.qk_space([many], 0, 0, model=folder),
    ):
        with pytest.raises(TypeError, match=one_at_a_time):
            call()
    with pytest.raises(TypeError, match=r"prompt is a string \(got a bytes\)$"):
        attnviz.generate(b"Hi", model=folder, max_new_tokens=2)
    with pytest.raises(TypeError, match=r"wrong is a string \(got an int\)$"):
        attnviz.patch("Anna gave it to", "Peter gave it to", " Peter", 5, model=folder)
    with pytest.raises(TypeError, match=r"target is a string \(got a list\)$"):  # not texts: no hint
        attnviz.attention("a text", model=folder, target=[None])


def test_the_doors_names_stay_its_functions_after_its_subpackages_are_imported():
    """The README's sequence: `attnviz.show(...)` then `attnviz.corpus([...])`. Importing the subpackage
    attnviz.corpus set the package's `corpus` to that module ("'module' object is not callable")."""
    import importlib

    import attnviz
    from attnviz import api

    importlib.import_module("attnviz.corpus.run")  # as the door's first call does
    assert attnviz.corpus is api.corpus and callable(attnviz.corpus)
    assert all(getattr(attnviz, name) is getattr(api, name) for name in attnviz.DOOR)
    assert importlib.import_module("attnviz.corpus").__name__ == "attnviz.corpus"  # the subpackage is still there


MYPY_CONFIG = """[mypy]
follow_imports = skip
ignore_missing_imports = true

[mypy-attnviz,attnviz.api]
follow_imports = normal
"""


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_type_checker_sees_the_doors_signatures(tmp_path, monkeypatch):
    """`import attnviz; attnviz.show("hi", layr=2)` passed mypy: the lazy __getattr__ made every door function an
    Any. A user's snippet is checked as a user's mypy reads the package (the door's names under TYPE_CHECKING; only
    attnviz and attnviz.api followed, so that it takes a second): the misspelled keyword is an error, the right
    call is not."""
    from mypy import api as mypy

    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    (tmp_path / "good.py").write_text('import attnviz\n\nview = attnviz.show("hi", layer=2)\nview.to_html("v.html")\n')
    (tmp_path / "bad.py").write_text('import attnviz\n\nattnviz.show("hi", layr=2)\n')
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    monkeypatch.chdir(tmp_path)
    args = ["--config-file", "mypy.ini", "--no-incremental", "--python-executable", sys.executable]
    out, err, status = mypy.run([*args, "good.py"])
    assert status == 0, out + err
    out, err, status = mypy.run([*args, "bad.py"])
    assert status == 1 and 'Unexpected keyword argument "layr" for "show"' in out, out + err


def _short(value) -> str:
    text = repr(value)
    assert 1 <= len(text.splitlines()) <= 5 and len(text) < 600, text[:800]
    assert "tensor(" not in text and "array(" not in text, text
    return text


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_every_result_prints_in_one_to_five_lines(tiny_llama_dir, tmp_path):
    """A View, a Results and an AttentionResult each printed about 24 KB of tensors (an Induction 48 KB, a query/key
    space 125 KB), kept as text/plain in every notebook: each says in a few lines what it holds."""
    results = attnviz.attention(SENTENCE)
    assert "6 layers × 12 heads × 16 × 16 tokens" in _short(results) and "default" in _short(results.main)
    view = attnviz.show(results, layer=2, head=3)
    assert "layer 2, head 3 (0-based)" in _short(view) and f"{view.size / 2**20:.1f} MB of HTML" in repr(view)
    decoder = str(tiny_llama_dir)
    assert "L1H2 (1-based) zero-ablated" in _short(attnviz.ablate(SENTENCE, "0.1", model=decoder))
    assert "best induction head" in _short(attnviz.induction(model=decoder, length=6, batch=2))
    assert "logit difference" in _short(attnviz.patch("a b c d", "a b c e", "d", "e", model=decoder))
    assert "tokens written after a" in _short(attnviz.generate("a b", model=decoder, max_new_tokens=3, chat=False))
    assert "faithfulness" in _short(attnviz.qk_space(["The cat sat.", "A dog ran."], 1, 1))
    run = attnviz.corpus(["The cat sat.", "A dog ran."], "default", tmp_path / "run")
    assert "over 2 texts" in _short(run) and "tables heads" in repr(run)
    assert [r.folder for r in attnviz.corpus_runs(tmp_path)] == [run.folder]  # the finished runs under a folder
