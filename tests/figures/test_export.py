"""Exports: PNG, SVG, CSV and JSON contents."""

import io
import json

import numpy as np
import pandas as pd
import pytest
from conftest import SENTENCE

from attnviz.figures import export


@pytest.mark.slow  # matplotlib and seaborn's first figures
def test_png_and_svg_of_a_layer_grid_and_a_head(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    png = export.figure_bytes(export.grid_figure(r, 0), "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    svg = export.figure_bytes(export.head_figure(r, 0, 3), "svg").decode()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "animal" in svg


def test_dollar_signs_do_not_break_the_figure():
    import torch

    from attnviz.result import AttentionResult

    toks = ("$", "5", "$")
    r = AttentionResult(torch.full((1, 1, 3, 3), 1 / 3), toks, toks, "self", "m")
    assert export.figure_bytes(export.head_figure(r, 0, 0), "png")[:4] == b"\x89PNG"


def test_every_token_labels_its_cell_columns_upright_rows_level():
    """The labels sit at the cells' centres, every token, columns turned 90°, rows level, on the outer axes of a grid
    (set by export._label, not by seaborn's overlap guess) and on each side-by-side panel."""
    import torch

    from attnviz.figures.panel_maps import Panel
    from attnviz.result import AttentionResult

    toks = ("[CLS]", "the", "$x$", "[SEP]")
    r = AttentionResult(torch.full((1, 8, 4, 4), 0.25), toks, toks, "self", "m")
    axes = export.grid_figure(r, 0).axes[1:]  # the colour bar first
    bottom, top = axes[4], axes[0]
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["[CLS]", "the", r"\$x\$", "[SEP]"]
    assert list(bottom.get_xticks()) == [0.5, 1.5, 2.5, 3.5] and list(top.get_yticks()) == [0.5, 1.5, 2.5, 3.5]
    assert all(t.get_rotation() == 90 for t in bottom.get_xticklabels())
    assert all(t.get_rotation() == 0 and t.get_text() for t in top.get_yticklabels())
    assert not any(t.get_text() for t in top.get_xticklabels())  # inner axes: the bottom row says it
    panel = Panel("self", np.full((4, 4), 0.25), toks, toks)
    ax = export.panels_figure([panel], "t").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["[CLS]", "the", r"\$x\$", "[SEP]"]
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {90}
    assert {t.get_rotation() for t in ax.get_yticklabels()} == {0}


def test_a_figure_names_a_bundled_model_by_the_model_it_is_not_its_name_in_the_app():
    """An exported figure is read away from the app: "default" says nothing there ("default — layer 1" it said)."""
    import torch

    from attnviz.result import AttentionResult

    toks = ("a", "b")
    for name, shown in (("default", "all-MiniLM-L6-v2 (BERT)"), ("gemma3", "Gemma 3 270M"), ("org/model", "org/model")):
        r = AttentionResult(torch.full((1, 2, 2, 2), 0.5), toks, toks, "self", name)
        assert export.head_figure(r, 0, 1).axes[0].get_title() == f"{shown} — layer 1, head 2 (self attention)"
        assert export.grid_figure(r, 0).get_suptitle() == f"{shown} — layer 1, all 2 heads (self attention)"
    one = AttentionResult(torch.full((1, 1, 2, 2), 0.5), toks, toks, "self", "org/model")  # a one-head toy model
    assert export.grid_figure(one, 0).get_suptitle() == "org/model — layer 1, its one head (self attention)"


def test_csv_values_equal_the_weights(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    m = r.weights[1, 4].numpy()
    frame = pd.read_csv(io.StringIO(export.matrix_csv(m, r.target_tokens, r.source_tokens)), index_col=0)
    assert np.allclose(frame.to_numpy(), m, atol=1e-7)
    assert frame.index[2] == "3:animal" and frame.columns[0] == "1:[CLS]"


def test_layer_csv_is_long_form(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    frame = pd.read_csv(io.StringIO(export.layer_csv(r.weights[0].numpy(), r.target_tokens, r.source_tokens)))
    assert len(frame) == 12 * 16 * 16
    row = frame[(frame["head"] == 5) & (frame["query_pos"] == 11) & (frame["key_pos"] == 3)].iloc[0]
    assert (row.query, row.key) == ("it", "animal")
    assert abs(row.weight - r.weights[0, 4, 10, 2].item()) < 1e-7 and "masked" not in frame.columns


def test_json_bundle_has_weights_and_manifest(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    man = export.Manifest("default", "hf", "cpu", SENTENCE, "self", 1, 4, {"hide_special": False})
    d = json.loads(export.bundle_json(r.weights[0, 3].numpy(), r.target_tokens, r.source_tokens, man))
    assert d["manifest"]["model"] == "default" and d["manifest"]["head"] == 4 and d["manifest"]["attnviz_version"]
    assert set(d["manifest"]) >= {"model", "backend", "device", "text", "layer", "head", "options", "attnviz_version"}
    assert np.allclose(np.array(d["weights"]), r.weights[0, 3].numpy()) and d["shape"] == [16, 16]


def test_a_causal_heads_json_says_which_cells_its_mask_forbids_and_keeps_their_weight():
    import torch

    from attnviz.figures.interactive import layer_masked
    from attnviz.result import AttentionResult

    i, j = np.indices((5, 5))
    w = torch.tensor(((j <= i) & (i - j < 2)) / np.minimum(np.arange(5) + 1, 2)[:, None], dtype=torch.float32)
    axis = tuple("abcde")
    r = AttentionResult(w[None, None].expand(1, 2, 5, 5).contiguous(), axis, axis, "causal", "m", windows=(2,))
    man = export.Manifest("m", "hf", "cpu", "abcde", "causal", 1, 1)
    d = json.loads(export.bundle_json(r.weights[0, 0].numpy(), axis, axis, man, masked=layer_masked(r, 0)))
    assert d["masked"] == ((j > i) | (i - j >= 2)).tolist() and d["weights"] == w.tolist()
    assert all(d["weights"][a][b] == 0 for a, b in zip(*np.nonzero(d["masked"]), strict=True))
    plain = AttentionResult(torch.full((1, 1, 2, 2), 0.5), axis[:2], axis[:2], "self", "m")
    assert layer_masked(plain, 0) is None and "masked" not in json.loads(export.bundle_json(w[:2, :2], "ab", "ab", man))
    # the layer's long-form CSV says the same, cell by cell, in its last column (BERT's has no such column)
    frame = pd.read_csv(io.StringIO(export.layer_csv(r.weights[0].numpy(), axis, axis, layer_masked(r, 0))))
    assert list(frame.columns)[-2:] == ["weight", "masked"] and len(frame) == 2 * 5 * 5
    for row in frame.itertuples():
        assert row.masked == bool(((j > i) | (i - j >= 2))[row.query_pos - 1, row.key_pos - 1])
        assert not row.masked or row.weight == 0
    # A map with no value in a cell writes null, never the NaN literal that JSON readers refuse.
    text = export.bundle_json(np.array([[0.5, np.nan]]), "a", "ab", man)
    assert "NaN" not in text and json.loads(text)["weights"] == [[0.5, None]]


@pytest.mark.slow  # matplotlib's export of every head
def test_overview_export_is_what_the_overview_shows(bundled_hf):
    from attnviz.figures import interactive

    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    thumbs, _, _ = interactive.pooled(r.weights, interactive.OVERVIEW_THUMB)
    png = export.figure_bytes(export.overview_figure(thumbs, "overview"), "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    frame = pd.read_csv(io.StringIO(export.thumbs_csv(thumbs)))
    assert len(frame) == 6 * 12 * 16 * 16
    row = frame[(frame["layer"] == 2) & (frame["head"] == 3) & (frame["row"] == 11) & (frame["column"] == 3)].iloc[0]
    assert abs(row["weight"] - r.weights[1, 2, 10, 2].item()) < 1e-7


def test_side_by_side_export_keeps_the_mask_as_masked():
    import numpy as np

    from attnviz.figures.panel_maps import Panel

    toks = ("a", "b", "c")
    causal = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    masked = np.triu(np.ones((3, 3), dtype=bool), 1)
    panels = [Panel("self", np.full((3, 3), 1 / 3), toks, toks), Panel("causal", causal, toks, toks, masked=masked)]
    man = export.Manifest("dates", "scratch", "cpu", "x", "self+causal+cross", 1, 1)
    d = json.loads(export.panels_json(panels, man))
    # A masked cell writes its weight (0, what the model computed) and says it is masked, as the Heads page's does.
    assert d["panels"][1]["weights"][0] == [1.0, 0.0, 0.0] and d["manifest"]["model"] == "dates"
    assert d["panels"][1]["masked"] == masked.tolist() and "masked" not in d["panels"][0] and "forbids" in d["note"]
    assert np.allclose(np.sum(d["panels"][1]["weights"], axis=1), 1)
    assert export.figure_bytes(export.panels_figure(panels, "t"), "png")[:4] == b"\x89PNG"


def _reachable(fn, depth=4):
    """Objects a function's closure reaches (cells, then their functions' cells, and containers)."""
    seen, out, todo = set(), [], [(fn, 0)]
    while todo:
        obj, d = todo.pop()
        if id(obj) in seen or d > depth:
            continue
        seen.add(id(obj))
        out.append(obj)
        if callable(obj) and getattr(obj, "__closure__", None):
            todo += [(c.cell_contents, d + 1) for c in obj.__closure__ if c.cell_contents is not None]
        elif isinstance(obj, list | tuple | dict):
            todo += [(v, d + 1) for v in (obj.values() if isinstance(obj, dict) else obj)]
    return out


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_download_callables_keep_names_not_results(bundled_hf, monkeypatch):
    """Streamlit keeps every session's download callables; holding a result there pinned 72 MiB per session."""
    import torch

    from attnviz.figures.style import Style
    from attnviz.result import AttentionResult
    from attnviz.ui import controls, widgets

    calls = []
    monkeypatch.setattr(widgets, "download_row", lambda *args, **kw: calls.append(args))
    inputs = controls.Inputs("default", "hf", SENTENCE, Style())
    fetch = lambda: bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]  # noqa: E731  (what the Heads page passes)
    opts = widgets.Options(False, False)
    widgets.export_buttons(inputs, fetch, 0, None, opts, "k")
    widgets.export_buttons(inputs, fetch, 0, 3, opts, "k2")
    widgets.export_overview(inputs, fetch, opts, "k3")
    for _stem, _key, *callables in calls:
        for fn in callables:
            held = [o for o in _reachable(fn) if isinstance(o, torch.Tensor | AttentionResult)]
            assert held == [], fn
    figure, csv = calls[1][2], calls[1][3]
    assert figure("png")[:4] == b"\x89PNG" and csv().startswith("query,")  # and they still build the files


def test_the_heads_pages_json_buttons_say_what_a_causal_mask_forbids(monkeypatch):
    import torch

    from attnviz.figures.style import Style
    from attnviz.result import AttentionResult
    from attnviz.ui import controls, widgets

    i, j = np.indices((5, 5))
    w = torch.tensor(((j <= i) & (i - j < 2)) / np.minimum(np.arange(5) + 1, 2)[:, None], dtype=torch.float32)
    axis = tuple("abcde")
    r = AttentionResult(w.expand(2, 3, 5, 5).contiguous(), axis, axis, "causal", "m", windows=(2, 5))
    calls = []
    monkeypatch.setattr(widgets, "download_row", lambda *args, **kw: calls.append(args))
    inputs, opts = controls.Inputs("default", "hf", "abcde", Style()), widgets.Options(False, False)
    widgets.export_buttons(inputs, lambda: r, 0, 1, opts, "k")  # one head of layer 1 (window 2)
    widgets.export_buttons(inputs, lambda: r, 1, None, opts, "k2")  # every head of layer 2 (window 5)
    widgets.export_overview(inputs, lambda: r, opts, "k3")
    head, layer, overview = (json.loads(c[4]()) for c in calls)
    assert head["masked"] == ((j > i) | (i - j >= 2)).tolist() and head["weights"] == w.tolist()
    assert layer["masked"] == (j > i).tolist() and layer["shape"] == [3, 5, 5]
    assert overview["masked"] == [((j > i) | (i - j >= 2)).tolist(), (j > i).tolist()]


@pytest.mark.slow  # matplotlib and seaborn's first figures
def test_a_causal_heads_png_draws_its_future_grey_as_the_app_does():
    import torch
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from attnviz.figures.style import MASKED_COLOUR
    from attnviz.result import AttentionResult

    t = 6
    s = torch.randn(1, 2, t, t).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    toks = tuple("abcdef")
    r = AttentionResult(s.softmax(-1), toks, toks, "causal", "m")
    grey = tuple(int(MASKED_COLOUR[i : i + 2], 16) for i in (1, 3, 5))
    for fig in (export.head_figure(r, 0, 1), export.grid_figure(r, 0)):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        pixels = np.asarray(canvas.buffer_rgba())[..., :3]
        ax = next(a for a in fig.axes if a.get_title() == "Head 2" or "head 2" in a.get_title())  # head 2 in both
        for i in range(t):
            for j in range(t):
                x, y = ax.transData.transform((j + 0.5, i + 0.5))
                colour = tuple(pixels[round(pixels.shape[0] - y), round(x)])
                assert (colour == grey) == (j > i), (i, j, colour)


def test_a_causal_overviews_png_leaves_each_tiles_future_out_on_grey():
    from attnviz.figures import interactive
    from attnviz.figures.style import MASKED_COLOUR

    thumbs = np.random.default_rng(0).random((2, 3, 5, 5)).astype(np.float32)
    masked = interactive.masked_cells(5, 5)
    fig = export.overview_figure(thumbs, "t", masked=masked)
    tiles = [ax for ax in fig.axes if ax.images]
    assert len(tiles) == 6
    for ax in tiles:
        shown = np.ma.masked_invalid(ax.images[0].get_array())
        assert np.array_equal(np.ma.getmaskarray(shown), masked)  # the future left out ...
        assert ax.get_facecolor()[:3] == pytest.approx(
            tuple(int(MASKED_COLOUR[i : i + 2], 16) / 255 for i in (1, 3, 5))
        )
    assert not np.isnan(export.overview_figure(thumbs, "t").axes[0].images[0].get_array()).any()


def test_a_long_texts_png_is_on_the_log_scale_the_page_draws_and_names_weights_on_its_bar():
    from matplotlib.colors import LogNorm

    from attnviz.figures.panel_maps import Panel
    from attnviz.figures.style import LogScale, weight_text

    n = 120
    w = np.tril(np.ones((n, n), dtype=np.float32))
    w /= w.sum(1, keepdims=True)
    masked = np.triu(np.ones((n, n), dtype=bool), 1)
    thumbs = np.where(masked, np.nan, w)[None, None]
    scale = LogScale.of(thumbs)
    fig = export.overview_figure(thumbs, "t", log=True)
    image = fig.axes[0].images[0]
    assert isinstance(image.norm, LogNorm) and (image.norm.vmin, image.norm.vmax) == pytest.approx((scale.low, 1.0))
    bar = fig.axes[-1]
    assert [t.get_text() for t in bar.get_yticklabels()] == [weight_text(v) for v in scale.ticks()]
    assert "log scale" in bar.get_ylabel()
    linear = export.overview_figure(thumbs, "t")
    assert not isinstance(linear.axes[0].images[0].norm, LogNorm)
    panel = Panel("window", w, ["a"] * n, ["b"] * n, masked=masked)
    ax = export.panels_figure([panel], "t", log=True).axes[0]
    assert isinstance(ax.collections[0].norm, LogNorm)
    assert ax.collections[0].norm.vmin == pytest.approx(LogScale.of(np.where(masked, np.nan, w)).low)
    assert export.figure_bytes(export.panels_figure([panel], "t", log=True), "png")[:4] == b"\x89PNG"
