"""Figure builders: what reaches the browser equals the engine's weights, labelled by its tokens."""

import html
import json

import numpy as np
import plotly.io as pio
import pytest
import torch
from conftest import SENTENCE
from plotly_data import array

from attnviz.figures import interactive, layout, panel_maps
from attnviz.result import AttentionResult
from attnviz.tokens import display_labels


def _random_result(l=2, h=4, t=10):
    w = torch.rand(l, h, t, t).softmax(-1)
    toks = tuple(f"t{i}" for i in range(t))
    return AttentionResult(w, toks, toks, "self", "rand")


def test_head_grid_has_one_heatmap_per_head_with_the_weights(bundled_hf):
    r = bundled_hf.run(SENTENCE)["self"]
    spec = json.loads(pio.to_json(interactive.head_grid(r, 2)))
    maps = [d for d in spec["data"] if d["type"] == "heatmap"]
    assert len(maps) == r.n_heads
    for h, d in enumerate(maps):
        assert np.allclose(array(d["z"]), r.weights[2, h].numpy(), atol=1e-7)
        assert [html.unescape(x.rsplit(" ·", 1)[0]) for x in d["x"]] == list(r.source_tokens)
    assert spec["layout"]["coloraxis"]["cmin"] == 0


def test_labels_are_escaped_and_unique():
    toks = ("<script>", "the", "the", "<s>")
    r = AttentionResult(torch.full((1, 1, 4, 4), 0.25), toks, toks, "self", "m")
    d = interactive.head_map(r, 0, 0).data[0]
    assert len(set(d.x)) == 4 and "&lt;script&gt; ·1" in d.x and not any("<" in x for x in d.x)


def test_large_inputs_are_pooled_and_stay_small():
    r = _random_result(l=6, h=12, t=512)
    grid = interactive.head_grid(r, 0)
    z = np.asarray(grid.data[0].z)
    assert z.shape == (86, 86)  # 512 tokens in blocks of 6
    assert abs(z.mean() - r.weights[0, 0].mean().item()) < 1e-3
    figures = {"grid": grid, "head": interactive.head_map(r, 0, 0), "overview": interactive.overview(r)}
    sizes = {name: len(pio.to_json(fig)) for name, fig in figures.items()}
    assert sum(sizes.values()) < 10 * 2**20, sizes


def test_overview_is_one_tiled_heatmap():
    r = _random_result(l=3, h=4, t=8)
    fig = interactive.overview(r)
    assert len(fig.data) == 1
    z = np.asarray(fig.data[0].z)
    assert z.shape == (3 * 9 - 1, 4 * 9 - 1)
    assert np.allclose(z[9:17, 18:26], r.weights[1, 2].numpy())  # layer 2, head 3
    assert np.isnan(z[8]).all()  # the gap between layers
    assert list(fig.layout.xaxis.ticktext) == ["H1", "H2", "H3", "H4"]


def test_projector_style_is_larger():
    r = _random_result()
    assert interactive.head_grid(r, 0, style=interactive.Style(projector=True)).layout.font.size == 20


def test_grid_layout_is_valid_for_any_head_count():
    for heads in (1, 2, 3, 5, 6, 8, 12, 16):
        r = _random_result(l=1, h=heads, t=5)
        for columns in (1, 4, 6):
            fig = interactive.head_grid(r, 0, columns=columns)
            assert len(fig.data) == heads
            assert all(
                0 <= v <= 1 for k in fig.layout if k.startswith(("xaxis", "yaxis")) for v in fig.layout[k].domain
            )


def test_side_by_side_draws_the_mask_as_masked_not_as_zero():
    t = 4
    causal = torch.tril(torch.ones(t, t))
    causal = (causal / causal.sum(-1, keepdim=True)).numpy()
    toks = tuple("abcd")
    masked = np.triu(np.ones((t, t), dtype=bool), 1)
    panels = [
        panel_maps.Panel("self", np.full((t, t), 0.25), toks, toks),
        panel_maps.Panel("causal", causal, toks, toks, masked=masked),
        panel_maps.Panel("cross", np.full((2, t), 0.25), ("x", "y"), toks),
    ]
    fig = panel_maps.side_by_side(panels)
    z = np.asarray(fig.data[1].z, dtype=float)
    assert np.isnan(z[masked]).all() and not np.isnan(z[~masked]).any()
    assert {d.coloraxis for d in fig.data} == {"coloraxis"}  # one colour scale
    assert fig.layout.coloraxis.cmax == 1.0 and fig.layout.plot_bgcolor == interactive.MASKED_COLOUR


def test_side_by_side_puts_a_difference_on_its_own_diverging_scale():
    toks = ("a", "b")
    fig = panel_maps.side_by_side(
        [
            panel_maps.Panel("p", np.eye(2), toks, toks),
            panel_maps.Panel("d", np.array([[0.5, -0.5], [0, 0]]), toks, toks, signed=True),
        ]
    )
    assert fig.data[1].coloraxis == "coloraxis2" and fig.layout.coloraxis2.cmid == 0.0


def test_side_by_side_panels_keep_their_row_labels_in_their_own_space():
    src, tgt = tuple("saturday 22"), ("<s>", "2", "0", "2", "6")
    panels = [
        panel_maps.Panel("self", np.full((11, 11), 1 / 11), src, src),
        panel_maps.Panel("masked", np.full((5, 5), 0.2), tgt, tgt),
        panel_maps.Panel("cross", np.full((5, 11), 1 / 11), tgt, src),
    ]
    fig = panel_maps.side_by_side(panels)
    x1, x2, x3 = (fig.layout[f"xaxis{s}"].domain for s in ("", "2", "3"))
    y1, y2, y3 = (fig.layout[f"yaxis{s}"].showticklabels for s in ("", "2", "3"))
    assert y1 and y2 and not y3  # the cross panel shares the masked panel's rows, so it shares its labels
    label_width = panel_maps._label_fraction([x for x in display_labels(tgt)], 12)
    assert x2[0] - x1[1] >= label_width + panel_maps.PANEL_GAP - 1e-9  # room for panel 2's own labels
    assert abs((x3[0] - x2[1]) - panel_maps.PANEL_GAP) < 1e-9  # no room needed before panel 3
    assert all(0 <= a < b <= 1 for a, b in (x1, x2, x3))


def test_side_by_side_panels_stand_in_rows_that_leave_every_key_its_label_and_two_scales_one_over_the_other():
    """Three panels of the default sentence's 16 tokens with a difference on its own scale (the Compare page): at
    1280x800 as many a row as give each key a label's line; on a projector one under another, each row's panel
    clear of the next one's title and key labels; the two colour bars stacked, not side by side."""
    toks = tuple(f"tok{i}" for i in range(16))
    w = np.full((16, 16), 1 / 16)
    panels = [panel_maps.Panel("bidirectional", w, toks, toks), panel_maps.Panel("causal", w, toks, toks),
              panel_maps.Panel("difference", w - w.T, toks, toks, signed=True)]  # fmt: skip
    for style, per_row in ((interactive.Style(), 2), (interactive.Style(projector=True), 1)):
        assert panel_maps.panels_a_row(panels, style) == per_row
        fig = panel_maps.side_by_side(panels, style=style)
        ys = [fig.layout[f"yaxis{s}"].domain for s in ("", "2", "3")]
        rows = sorted({tuple(y) for y in ys}, reverse=True)
        assert len(rows) == -(-3 // per_row)
        assert all(
            lower[1] < upper[0] for upper, lower in zip(rows, rows[1:], strict=False)
        )  # a gap for labels and a title
        assert [fig.layout[f"yaxis{s}"].title.text for s in ("", "2", "3")][::per_row] == ["query"] * len(rows)
        xs = [fig.layout[f"xaxis{s}"].domain for s in ("", "2", "3")]
        assert len({round(x1 - x0, 6) for x0, x1 in xs}) == 1  # a short last row keeps the others' width
        titles = [a.y for a in fig.layout.annotations]
        assert titles == pytest.approx([y[1] for y in ys])  # each panel's title sits on its own row's top
        bars = fig.layout.coloraxis.colorbar, fig.layout.coloraxis2.colorbar
        assert bars[0].y - bars[0].len >= bars[1].y + bars[1].len - 1e-9  # the weight bar over the difference's
    keys = tuple(f"k{i}" for i in range(40))  # one panel of 40 keys on a projector: no layout gives each its line
    alone = panel_maps.side_by_side([panel_maps.Panel("steps", np.full((3, 40), 1 / 40), ("a", "b", "c"), keys)],
                                     style=interactive.Style(projector=True))  # fmt: skip
    step = int(alone.layout.xaxis.title.text.split()[2][:-2])
    assert step > 1 and alone.layout.xaxis.title.text == f"key: every {step}{layout.ordinal(step)} of 40 labelled"
    assert list(alone.layout.xaxis.tickvals) == [f"k{i} ·{i + 1}" for i in range(0, 40, step)]
    wide = [panel_maps.Panel("many", np.full((80, 80), 1 / 80), tuple(map(str, range(80))), tuple(map(str, range(80))))]
    assert panel_maps.panels_a_row(wide * 3, interactive.Style(projector=True)) == 3  # unlabelled: one row


def test_the_cost_chart_shows_weights_and_time_as_two_measured_series_beside_n_and_n_squared():
    from attnviz.lessons.cost import Cost

    costs = [Cost(16, 1.0, 0.01, None), Cost(32, 1.5, 0.04, None), Cost(64, 3.0, 0.16, None)]
    fig = interactive.cost_chart(costs)
    names = [d.name for d in fig.data]
    assert names == ["∝ N", "∝ N²", "attention weights (MB)", "time of one pass (ms)"]
    assert list(fig.data[2].y) == [1.0, 4.0, 16.0] and list(fig.data[3].y) == [1.0, 1.5, 3.0]
    assert list(fig.data[3].customdata) == [1.0, 1.5, 3.0]  # the measured values, on hover


def test_panel_titles_stay_over_their_panels_and_out_of_the_figure_title():
    toks = ("a", "b")
    fig = panel_maps.side_by_side([panel_maps.Panel("first\nline two", np.eye(2), toks, toks)], title="<b>whole</b>")
    assert fig.layout.title.text == "&lt;b&gt;whole&lt;/b&gt;"  # the figure's own title, escaped
    assert [a.text for a in fig.layout.annotations] == ["first<br>line two"]


# --- long texts (attnviz/figures/lazy_maps.py) ---


def test_a_click_on_the_zoomable_map_names_the_block_under_it():
    from attnviz.figures import lazy_maps

    n, f = 10, 4  # blocks 1-4, 5-8, 9-10
    assert lazy_maps.block_centres(n, f).tolist() == [2.5, 6.5, 9.5]
    fig = lazy_maps.zoomable_map(np.arange(9, dtype=np.float32).reshape(3, 3), f, n, "<b>t</b>")
    markers = fig.data[1]
    assert len(markers.x) == 9 and array(markers.x).tolist()[:3] == [2.5, 6.5, 9.5]  # one clickable marker a cell
    assert array(markers.y).tolist()[:4] == [2.5, 2.5, 2.5, 6.5]  # row by row: point k is block divmod(k, 3)
    event = {"selection": {"points": [{"curve_number": 1, "point_index": 5}]}}
    assert lazy_maps.clicked_cell(event, 3) == (1, 2)
    assert lazy_maps.clicked_cell({"selection": {"points": [{"curve_number": 0, "point_index": 5}]}}, 3) is None
    assert lazy_maps.clicked_cell({"selection": {"points": [{"curve_number": 1, "point_index": 9}]}}, 3) is None
    assert lazy_maps.clicked_cell(None, 3) is None
    assert "<b>" not in fig.layout.title.text


def test_the_exact_window_keeps_its_weights_masks_and_the_share_outside_and_escapes_tokens():
    from attnviz.figures import lazy_maps

    w = np.array([[0.5, 0.0], [0.2, 0.3]], dtype=np.float32)
    masked = np.array([[False, True], [False, False]])
    fig = lazy_maps.window_map(w, ["<script>x</script>", "it"], ["a", "b"], 1030, 7, np.array([0.5, 0.5]), "t",
                          masked=masked)  # fmt: skip
    z = array(fig.data[0].z)
    assert np.isnan(z[0, 1]) and z[1].tolist() == pytest.approx([0.2, 0.3])  # masked cells are gaps, not zeros
    assert array(fig.data[1].z).ravel().tolist() == [0.5, 0.5]  # what each row gives to keys outside the window
    assert list(fig.data[0].y) == ["&lt;script&gt;x&lt;/script&gt; ·1031", "it ·1032"]  # positions 1-based
    assert list(fig.data[0].x) == ["a ·8", "b ·9"]


def test_a_grid_labels_every_token_on_every_map_up_to_64_and_none_past_it():
    for t in (5, 17, 40, 64):
        fig = interactive.head_grid(_random_result(l=1, h=12, t=t), 0)
        axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
        assert len(axes) == 24
        assert all(a.showticklabels and a.tickmode == "linear" and a.dtick == 1 for a in axes), t
        columns = len({a.domain for a in axes if a.anchor.startswith("y")})  # x axes: one domain per column
        first = fig.layout.xaxis.domain
        width = (layout.GRID_WIDTH - fig.layout.margin.l) * (first[1] - first[0])
        assert width >= t * (fig.layout.font.size + 1) - 1, (t, columns)  # each token a label's line
    for t, style in ((65, interactive.Style()), (41, interactive.Style(projector=True))):  # the stated rule
        fig = interactive.head_grid(_random_result(l=1, h=12, t=t), 0, style=style)
        assert not any(fig.layout[k].showticklabels for k in fig.layout if k.startswith(("xaxis", "yaxis")))
        assert "too many to label on each map" in fig.layout.title.text


def test_projector_mode_scales_every_maps_labels_by_at_least_one_and_a_half():
    r = _random_result(l=1, h=4, t=12)
    plain, big = interactive.Style(), interactive.Style(projector=True)
    for build in (lambda s: interactive.head_grid(r, 0, style=s), lambda s: interactive.head_map(r, 0, 0, style=s),
                  lambda s: interactive.matrix(np.eye(12), "m", rows=list("abcdefghijkl"), style=s)):  # fmt: skip
        a, b = build(plain), build(big)
        assert b.layout.font.size >= 1.5 * a.layout.font.size
        assert b.layout.height >= a.layout.height


def test_every_small_matrix_has_a_colour_bar_a_title_in_lines_and_a_stated_label_rule():
    fig = interactive.matrix(np.random.rand(64, 32), "PE: 64 positions × 32 dimensions, compared each with each",
                             rows=[str(i) for i in range(64)], cols=[f"d{i}" for i in range(32)],
                             style=interactive.Style(), signed=False)  # fmt: skip
    heat = fig.data[0]
    assert heat.showscale is not False and heat.colorbar.title.text == "weight"
    assert "<br>" in fig.layout.title.text  # wrapped to the column, never cut
    assert list(fig.layout.yaxis.tickvals) == [str(i) for i in range(64)]  # the map grows: a line for every row
    labelled = fig.layout.xaxis.tickvals  # 32 columns in a third of the page: every k-th, and the axis says so
    step = int(labelled[1][1:]) - int(labelled[0][1:])
    assert step > 1 and fig.layout.xaxis.title.text == f"every {step}{layout.ordinal(step)} labelled"
    pe = interactive.matrix(np.random.rand(8, 384), "PE", rows=list("abcdefgh"), cols=[f"d{i + 1}" for i in range(384)])
    assert (
        pe.layout.xaxis.showticklabels is False and pe.layout.xaxis.title.text == "d1 … d384, too many to label: hover"
    )
    small = interactive.matrix(np.eye(6), "m", rows=list("abcdef"), cols=list("abcdef"))
    assert list(small.layout.yaxis.tickvals) == list("abcdef") and list(small.layout.xaxis.tickvals) == list("abcdef")


def test_small_maps_side_by_side_stand_as_many_a_row_as_leave_every_token_its_label():
    """Inside's steps, the Masks page and One head vs many lay their maps out by maps_a_row: each map, in the column
    it gets, labels every one of the default sentence's 16 tokens on both axes; a projector's larger labels put
    fewer maps in a row, never thinner labels."""
    from attnviz.figures.interactive import Style, maps_a_row, matrix
    from attnviz.figures.layout import COLUMN_GAP, MAIN_PX

    words = "[CLS] the animal didn ' t cross the street because it was too tired . [SEP]"  # SENTENCE's pieces
    labels = [f"{w} ·{i + 1}" for i, w in enumerate(words.split(" "))]
    per_row = {}
    for style in (Style(), Style(projector=True)):
        k, px = maps_a_row(labels, len(labels), style, most=3)
        assert k * px + (k - 1) * COLUMN_GAP <= MAIN_PX[style.projector]
        fig = matrix(np.random.rand(16, 16), "softmax: attention weights", rows=labels, cols=labels, style=style,
                     width=px)  # fmt: skip
        assert list(fig.layout.xaxis.tickvals) == labels and list(fig.layout.yaxis.tickvals) == labels
        per_row[style.projector] = k
    assert per_row[False] > per_row[True] >= 1
    many = [f"token{i}" for i in range(60)]  # too many for any column: the axis says its rule
    fig = matrix(np.random.rand(60, 60), "m", rows=many, cols=many, width=maps_a_row(many, 60, most=3)[1])
    assert "labelled" in fig.layout.xaxis.title.text


def test_a_head_grids_cell_labels_fit_their_cells_on_a_projector():
    """The pronoun grid names each head's pick in its cell ("street", "animal"): on a projector's larger font the
    cell text shrinks until the longest fits its cell; the side-by-side maps say when their tokens go unlabelled."""
    from attnviz.figures.layout import CHAR
    from attnviz.figures.panel_maps import Panel, side_by_side
    from attnviz.figures.stat_charts import STAT_GRID_PX, stat_grid
    from attnviz.figures.style import Style

    labels = [["street", "animal"] * 6 for _ in range(6)]
    for style in (Style(), Style(projector=True)):
        size = stat_grid(np.zeros((6, 12)), labels, "on animal", style=style).data[0].textfont.size
        assert size * CHAR * len("street") <= STAT_GRID_PX / 12
        assert size <= style.font_size - 2
    many = [f"t{i}" for i in range(80)]
    fig = side_by_side([Panel("one", np.zeros((80, 80)), many, many)])
    assert fig.layout.xaxis.title.text == "key: 80 tokens, too many to label"
    assert fig.layout.yaxis.title.text == "query: 80 tokens"
