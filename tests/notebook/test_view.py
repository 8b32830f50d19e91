"""The notebook view: attention a user has (Hugging Face's own, arrays) drawn as the app draws it, offline."""

import re

import numpy as np
import pytest
import torch
from conftest import SENTENCE
from transformers import AutoModel, AutoTokenizer

from attnviz.analysis import head_stats
from attnviz.engines import registry
from attnviz.notebook import view

EXTERNAL = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*['\"]?(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def hf_outputs():
    folder = registry.default_model_dir()
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    enc = tok(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    return out.attentions, tok.convert_ids_to_tokens(enc["input_ids"][0])


def test_a_model_s_whole_output_or_one_called_without_attentions_says_what_to_pass():
    """Passing `outputs` where `outputs.attentions` goes failed in NumPy's words ("float() argument must be ... not
    'BaseModelOutputWithPoolingAndCrossAttentions'"); `outputs.attentions` of a model called without
    output_attentions=True is None, and show said only "show what?"."""
    import attnviz

    folder = registry.default_model_dir()
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder, attn_implementation="eager")
    enc = tok(SENTENCE, return_tensors="pt")
    pieces = tok.convert_ids_to_tokens(enc["input_ids"][0])
    with torch.no_grad():
        out, bare = model(**enc, output_attentions=True), model(**enc)
    with pytest.raises(TypeError, match=r"the model's whole output: pass outputs\.attentions$"):
        attnviz.show(out, pieces)
    with pytest.raises(TypeError, match=r"pass outputs\.attentions \(it holds none: call the model with output_at"):
        attnviz.show(bare, pieces)
    with pytest.raises(ValueError, match=r"attention is None: outputs.attentions of a model called without"):
        attnviz.show(bare.attentions, pieces)
    assert attnviz.show(out.attentions, pieces).result.weights.shape[0] == 6


def test_transformers_own_attentions_draw_the_apps_numbers(hf_outputs, bundled_hf):
    attentions, pieces = hf_outputs
    result = view.result_of(attentions, pieces)
    app = bundled_hf.run(bundled_hf.encode(SENTENCE)).main  # what the Heads page draws
    assert (result.weights - app.weights).abs().max() < 1e-6
    assert result.target_tokens == app.target_tokens and result.kind == "self"
    v = view.View(result, layer=2, head=3)
    figs = v.figures()
    grid, one = figs[1], figs[2]
    assert np.abs(np.array(grid.data[0].z, dtype=float) - app.weights[2, 0].numpy()).max() < 1e-6
    assert np.abs(np.array(one.data[0].z, dtype=float) - app.weights[2, 3].numpy()).max() < 1e-6
    assert list(figs[0].data[0].z.shape) == [app.n_layers, app.n_heads]  # the layer x head grid of a statistic
    assert figs[0].data[0].colorbar.title.text == head_stats.SHORT[v.statistic] != v.statistic  # "prev": a key


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_half_precision_and_float64_attentions_draw_as_float32_rows_that_sum_to_1(hf_outputs, dtype):
    """Most models people load are bfloat16: NumPy has no such type ("Got unsupported ScalarType BFloat16"), and
    float16's rows were off by 3.7e-4 where a result allows 1e-4. Each is cast to float32, its rows divided by their
    sums, and drawn; the weights stay within the dtype's rounding of the float32 ones."""
    attentions, pieces = hf_outputs
    result = view.result_of(tuple(a.to(dtype) for a in attentions), pieces)
    exact = torch.stack([a[0] for a in attentions])
    assert result.weights.dtype == torch.float32
    assert (result.weights.sum(-1) - 1).abs().max() < 1e-5
    bound = {torch.bfloat16: 2**-8, torch.float16: 2**-10, torch.float64: 1e-6}[dtype]
    assert (result.weights - exact).abs().max() <= bound
    assert len(view.View(result, layer=2, head=3).figures()) == 3
    as_array = view.result_of(np.asarray(exact.double()), pieces)  # float64 as NumPy has it
    assert (as_array.weights - exact).abs().max() < 1e-6


def test_the_same_weights_get_the_same_head_labels_however_they_come_in(hf_outputs, bundled_hf):
    """show(text) called a head "[CLS]" and show(outputs.attentions, tokens) on identical weights called it
    "first-token": the tokens a user passes now mark their special tokens by name, as the engine's run does."""
    from attnviz.analysis import head_stats
    from attnviz.tokens import named_special

    attentions, pieces = hf_outputs
    theirs, ours = view.result_of(attentions, pieces), bundled_hf.run(bundled_hf.encode(SENTENCE)).main
    assert theirs.target.special == ours.target.special == (True,) + (False,) * 14 + (True,)

    def labels(r):
        return head_stats.labels(r.stats(), head_stats.uniform_entropy(r), r.kind)

    assert labels(theirs) == labels(ours) and any("[CLS]" in row for row in labels(ours))
    names = ("[CLS]", "[SEP]", "<|endoftext|>", "<|im_start|>", "<s>", "</s>", "<pad>", "<start_of_turn>")
    assert all(named_special(t) for t in names)
    assert not any(named_special(t) for t in ("the", "Ġanimal", "[", "<", "[cls]", "< s>", "<3", "a<b>"))


def test_the_html_is_self_contained_and_says_its_size(hf_outputs, tmp_path):
    attentions, pieces = hf_outputs
    v = view.View(view.result_of(attentions, pieces))
    html = v.html()
    assert not EXTERNAL.search(html)  # no script, stylesheet or frame from the network
    assert "require(" not in html.split("(function (define, module, exports)")[0]  # no require.js loading
    assert html.count("-still' src='data:image/png;base64,") == 3 and v.size == len(html.encode())
    stated = float(re.search(r"this output is ([\d.]+) MB", html).group(1))
    assert abs(stated - v.size / 2**20) < 0.051  # the size is stated on the output itself
    page = v.to_html(tmp_path / "v.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and not EXTERNAL.search(page)


@pytest.mark.slow  # 4.5 s: three views with their stills (the fast loop draws stills in the size test above)
def test_a_kernel_gets_plotly_js_once_and_every_view_carries_still_pictures(hf_outputs, monkeypatch):
    """Ten views made a 48 MiB notebook (plotly.js, 4.6 MB, in each). A kernel's first view carries plotly.js, each
    later one its figures' data and a still PNG of each figure (what shows where scripts do not run); Colab, whose
    outputs are frames of their own, gets it every time. A token that closes a script tag stays text."""
    import base64
    import io
    import sys

    from PIL import Image

    attentions, pieces = hf_outputs
    monkeypatch.setattr(view, "_PLOTLY_SENT", False)  # a fresh kernel
    pieces = list(pieces)
    pieces[3] = "</script><b>x"
    first, second = (view.View(view.result_of(attentions, pieces), layer=k)._repr_html_() for k in (0, 1))
    js = view.plotly_js()
    assert js in first and js not in second and "(function (define, module, exports)" not in second
    assert len(second.encode()) < len(first.encode()) - len(js.encode()) + 100_000
    assert len(second.encode()) < 800_000, len(second.encode())  # ten such views: well under 8 MiB with the first
    assert "came with this kernel's first view" in second
    for html in (first, second):
        assert "</script><b>" not in html and html.count("</script>") == html.count("<script")
        stills = re.findall(r"-still' src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
        assert len(stills) == 3
        for still in stills:  # a real picture of a figure: hundreds of pixels a side, more than a blank
            img = Image.open(io.BytesIO(base64.b64decode(still)))
            assert img.width >= 400 and img.height >= 300 and len(img.convert("RGB").getcolors(4096) or []) > 8
    monkeypatch.setitem(sys.modules, "google.colab", object())
    assert js in view.View(view.result_of(attentions, pieces))._repr_html_()  # Colab: every output its own frame


def test_raw_pieces_read_as_text():
    assert view.piece_text("Ġanimal") == "animal" and view.piece_text("Ċ") == "↵"
    assert view.piece_text("▁animal") == "animal" and view.piece_text("##ing") == "##ing"
    assert view.piece_text("[CLS]") == "[CLS]" and view.piece_text("ĠĠ") == "␣␣"
    assert view.piece_text("Ã©") == "é"  # a byte-level piece of a two-byte character


def test_cross_attention_with_other_key_tokens_and_a_single_layer_array():
    rng = np.random.default_rng(0)
    raw = rng.random((4, 3, 5))  # (H, Tq, Tk): one layer
    weights = raw / raw.sum(-1, keepdims=True)
    r = view.result_of(weights, ["a", "b", "c"], key_tokens=["v", "w", "x", "y", "z"])
    assert r.kind == "cross" and r.weights.shape == (1, 4, 3, 5)
    figs = view.View(r).figures()
    assert len(figs) == 3 and figs[0].layout.title.text.startswith("All 1 layer × 4 heads")


def test_a_causal_pattern_is_recognised_and_bad_input_says_what_to_pass():
    causal = torch.tril(torch.ones(2, 2, 4, 4))
    causal = causal / causal.sum(-1, keepdim=True)
    assert view.result_of(causal, list("abcd")).kind == "causal"
    with pytest.raises(ValueError, match="output_attentions=True"):
        view.result_of(())
    with pytest.raises(ValueError, match="after the softmax"):
        view.result_of(torch.ones(1, 1, 3, 3), list("abc"))
    with pytest.raises(ValueError, match=r"within 0\.005.*1\.01"):  # past half precision's rounding
        view.result_of(torch.full((1, 1, 2, 2), 0.505), list("ab"))
    with pytest.raises(ValueError, match="NaN or infinite"):
        view.result_of(torch.tensor([[[[float("nan"), 1.0], [0.5, 0.5]]]]), list("ab"))
    with pytest.raises(ValueError, match="4 queries, but 3 query tokens"):
        view.result_of(causal, list("abc"))
    with pytest.raises(ValueError, match="key_tokens"):
        view.result_of(torch.full((1, 2, 5), 1 / 5))
    with pytest.raises(TypeError, match=r"tokens is a list of the tokens, one per query, not the text"):
        view.result_of(causal, "abcd efgh")  # was read as 9 tokens, one per character
    with pytest.raises(TypeError, match=r"key_tokens is a list of the tokens, one per key, not the text"):
        view.result_of(torch.full((1, 2, 5), 1 / 5), ["a", "b"], key_tokens="a text")
    with pytest.raises(ValueError, match="0-based"):
        view.View(view.result_of(causal, list("abcd")), layer=2)
    assert view.View(view.result_of(causal, list("abcd")), layer=np.int64(1)).layer == 1  # a numpy index is one


@pytest.mark.parametrize(
    ("kw", "error", "said"),
    [
        ({"layer": "1"}, TypeError, "layer is a whole number .got '1', a str"),  # a widget's text
        ({"head": 1.0}, TypeError, "head is a whole number .got 1.0, a float"),
        ({"head": True}, TypeError, "head is a whole number"),
        ({"layer": -1}, ValueError, "0-based here, from 0"),
        ({"statistic": "entropy "}, ValueError, "statistic is one of prev, first, self, entropy"),
    ],
)
def test_show_says_what_is_wrong_with_its_layer_head_and_statistic_before_a_model_runs(monkeypatch, kw, error, said):
    """attnviz.show's layer, head and statistic checked first: a "1" from a notebook's widget failed after the model
    ran, comparing an int with a str deep inside. Nothing runs: the model's door is replaced by one that fails."""
    import attnviz
    from attnviz import api

    def ran(*_a, **_k):
        raise AssertionError("the model ran before the arguments were checked")

    monkeypatch.setattr(api, "_results", ran)
    assert attnviz.show is api.show
    with pytest.raises(error, match=said):
        attnviz.show("The animal didn't cross the street.", **kw)


@pytest.mark.slow  # every export format of a notebook view
def test_exports_write_what_the_app_exports(hf_outputs, tmp_path):
    attentions, pieces = hf_outputs
    v = view.View(view.result_of(attentions, pieces), layer=1, head=0)
    assert v.to_png(tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"
    assert v.to_svg(tmp_path / "l.svg", whole_layer=True).read_text().lstrip().startswith("<?xml")
    csv = v.to_csv(tmp_path / "h.csv").read_text().splitlines()
    assert csv[0].startswith("query,1:[CLS],2:the") and len(csv) == len(pieces) + 1
    assert '"layer": 2' in v.to_json(tmp_path / "h.json").read_text()


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_a_long_text_draws_in_a_notebook_as_the_apps_long_path(tiny_long_llama_dir, monkeypatch, tmp_path):
    """show() on a text past the eager budget computed for a minute, then refused ("this is a long text's attention
    ... show a window of it on the Heads page"). It draws the app's long path: the statistics streamed, the layer's
    pooled maps from the first pass, the head pooled from its exact weights; an export of every weight says why not."""
    from attnviz import api
    from attnviz.blocks import block_mean, pool_factor
    from attnviz.engines import registry
    from attnviz.figures import interactive
    from attnviz.result import AttentionResult

    monkeypatch.setenv("ATTNVIZ_EAGER_MB", "1")  # the tiny Llama goes long past 147 tokens
    text = " ".join(["The animal didn't cross the street because it was too tired."] * 30)
    engine = registry.load(str(tiny_long_llama_dir), "hf", "cpu")
    enc = engine.encode(text)
    n = len(enc.ids)
    assert n > 400
    v = api.show(text, model=str(tiny_long_llama_dir), layer=1, head=2)
    assert v.long and "held as queries and keys" in repr(v.result)
    stats, grid, one = v.figures()
    with torch.inference_mode():
        exact = AttentionResult(engine.weights_of(enc.ids), enc.axis, enc.axis, "causal", "eager")  # every weight
    f = pool_factor(n, view.SIDES["layer"])
    z, means = np.asarray(grid.data[2].z, dtype=float), block_mean(exact.weights[1, 2], f, f).numpy()
    assert np.array_equal(np.isnan(z), interactive.masked_cells(n, n, f, f))  # wholly in the future: grey
    weights = np.asarray(grid.data[2].customdata, dtype=float)  # on the app's log scale: the hover's weights
    assert np.abs(np.nan_to_num(weights) - means).max() < 1e-5
    low = 10**grid.layout.coloraxis.cmin
    assert np.abs(np.nan_to_num(z - np.log10(np.maximum(means, low)))).max() < 1e-5  # and coloured by their log
    assert np.abs(np.asarray(stats.data[0].z, dtype=float) - exact.stats()["prev"].numpy()).max() < 1e-5
    assert one.layout.title.text.startswith("Layer 2, head 3") and "a long text: maps pooled" in v.html()[:2000]
    monkeypatch.delenv("ATTNVIZ_EAGER_MB")
    cut = api.show("word " * 600, layer=0, head=0)  # past BERT's 512 tokens: the view says what was cut
    assert "the text was cut to fit the model: 90 tokens at the end dropped" in cut.html()[:2000]
    with pytest.raises(ValueError, match="kept as queries and keys: export a window"):
        v.to_csv(tmp_path / "x.csv")
