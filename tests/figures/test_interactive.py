"""Figure builders: what reaches the browser equals the engine's weights, labelled by its tokens."""

import html
import json

import numpy as np
import plotly.io as pio
import pytest
import torch
from conftest import SENTENCE
from plotly_data import array

from attnviz.figures import interactive, layout, lesson_charts
from attnviz.result import AttentionResult


def _random_result(l=2, h=4, t=10):
    w = torch.rand(l, h, t, t).softmax(-1)
    toks = tuple(f"t{i}" for i in range(t))
    return AttentionResult(w, toks, toks, "self", "rand")


def test_head_grid_has_one_heatmap_per_head_with_the_weights(bundled_hf):
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
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
    # ... and measured as the browser draws them ("<script> ·1", 11 characters): not as escaped (19), which took a
    # phone's row labels 132 of its 358 px on the date model's maps
    assert layout.drawn_chars(d.y) == len("<script> ·1")
    assert layout.row_label_px(d.y, 12) == layout.row_label_px(["<script> ·1"], 12) < layout.CHAR * 12 * 19


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
    # square cells kept to the axes' domains (the names follow the tiles), the figure as tall as the tiles at the
    # column's width, no taller than 70 px a layer: 3 x 4 tiles of 8 tokens (26 x 35 cells) would be 510 px tall at
    # a laptop's 686 px, so 210; BERT's 6 x 12 of 16 (101 x 203 cells) 341 px, under 420
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.xaxis.constrain == fig.layout.yaxis.constrain == "domain"
    plot_w = layout.main_px(interactive.Style()) - 20 - 4 * 12 - layout.bar_px(12)
    assert fig.layout.height == 70 * 3 + 70 + 24 + layout.BAR_ACROSS_PX  # and its bar across the top (below)
    bert = interactive.overview(_random_result(l=6, h=12, t=16))
    assert bert.layout.height == round(plot_w * 101 / 203) + 70 + 24 < 70 * 6 + 70 + 24
    # BERT's tiles fill the column, its bar down their right; tiles narrower than the column (these 3 x 4, Gemma 3's
    # 18 x 4 of 32) stand at its left, their bar across their top as long as they are wide (centred, Gemma 3's stood
    # 230 px from its bar on a laptop, 400 on a projector)
    assert bert.layout.coloraxis.colorbar.orientation in (None, "v") and bert.layout.xaxis.constraintoward is None
    big = interactive.overview(_random_result(l=6, h=12, t=16), style=interactive.Style(projector=True))
    assert big.layout.coloraxis.colorbar.orientation == "h"  # a projector's column: 740 px or 1,380, not known here
    for style in (interactive.Style(), interactive.Style(projector=True)):
        deep = interactive.overview(_random_result(l=18, h=4, t=32), style=style)
        bar, tiles = deep.layout.coloraxis.colorbar, 70 * 18 * (4 * 33 - 1) / (18 * 33 - 1)
        assert bar.orientation == "h" and bar.lenmode == "pixels" and abs(bar.len - tiles) < 1
        assert deep.layout.xaxis.constraintoward == "left" and bar.x == 0 and bar.xanchor == "left"
    assert fig.layout.coloraxis.colorbar.orientation == "h"
    phone = interactive.overview(r, style=interactive.Style(phone=True))
    assert phone.layout.coloraxis.colorbar.orientation == "h"  # across its top, not down the 358 px column's side


def test_projector_style_is_larger():
    r = _random_result()
    assert interactive.head_grid(r, 0, style=interactive.Style(projector=True)).layout.font.size == 20


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_grid_layout_is_valid_for_any_head_count():
    for heads in (1, 2, 3, 5, 6, 8, 12, 16):
        r = _random_result(l=1, h=heads, t=5)
        for columns in (1, 4, 6):
            fig = interactive.head_grid(r, 0, columns=columns)
            assert len(fig.data) == heads
            assert all(
                0 <= v <= 1 for k in fig.layout if k.startswith(("xaxis", "yaxis")) for v in fig.layout[k].domain
            )


def test_the_cost_chart_shows_weights_and_time_as_two_measured_series_beside_n_and_n_squared():
    from attnviz.lessons.cost import Cost

    costs = [Cost(16, 1.0, 0.01, None), Cost(32, 1.5, 0.04, None), Cost(64, 3.0, 0.16, None)]
    fig = interactive.cost_chart(costs)
    names = [d.name for d in fig.data]
    assert names == ["∝ N", "∝ N²", "attention weights (MB)", "time of one pass (ms)"]
    assert list(fig.data[2].y) == [1.0, 4.0, 16.0] and list(fig.data[3].y) == [1.0, 1.5, 3.0]
    assert list(fig.data[3].customdata) == [1.0, 1.5, 3.0]  # the measured values, on hover
    # the measured N on the axis (plotly's log ticks read "2 3 4 5 6 7 8 9 100"), powers of ten up it, and the
    # legend in rows over the plot: down its side it took half a phone's chart
    assert list(fig.layout.xaxis.tickvals) == [16, 32, 64] and list(fig.layout.xaxis.ticktext) == ["16", "32", "64"]
    assert fig.layout.yaxis.dtick == 1 and fig.layout.legend.orientation == "h" and fig.layout.legend.y == 1.0
    phone = interactive.cost_chart(costs, style=interactive.Style(phone=True))
    rows = lesson_charts.legend_rows(names, layout.PHONE_WIDTH, 12)
    assert rows > 1 and phone.layout.margin.t == 10 + rows * 20 and phone.layout.height == 380 + rows * 20


# --- long texts (attnviz/figures/lazy_maps.py) ---


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
        unlabelled = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
        assert not any(a.showticklabels for a in unlabelled)
        assert all(a.ticks == "" for a in unlabelled)  # no tick marks either: they marked nothing a person could read
        assert "too many to label on each map" in fig.layout.title.text


def test_a_phones_layer_grid_is_one_labelled_map_a_row_laid_out_for_its_width():
    """On a 390 px phone a desktop's grid (four maps a row laid out for 900 px) put each map's row labels on the map
    to its left. A phone's grid is one map a row: every map at the same place across, labelled, no wider than the
    phone's column leaves it; a text too long for a line a token there (40 tokens in about 300 px) is unlabelled, and
    the title says so."""
    phone = interactive.Style(phone=True)
    for heads, t in ((12, 16), (9, 20), (4, 40)):
        fig = interactive.head_grid(_random_result(l=1, h=heads, t=t), 0, style=phone)
        xs = [fig.layout[k] for k in fig.layout if k.startswith("xaxis")]
        assert len({a.domain for a in xs}) == 1, (heads, t)  # one column
        map_px = (layout.PHONE_WIDTH - fig.layout.margin.l) * (xs[0].domain[1] - xs[0].domain[0])
        if t <= 20:
            assert all(a.showticklabels for a in xs), (heads, t)
            assert map_px >= t * (fig.layout.font.size + 1) - 1, (heads, t)  # each token a label's line
        else:
            assert not any(a.showticklabels for a in xs) and "too many to label" in fig.layout.title.text
    desktop = interactive.head_grid(_random_result(l=1, h=12, t=16), 0)
    assert len({desktop.layout[k].domain for k in desktop.layout if k.startswith("xaxis")}) > 1  # as before


def test_a_projectors_layer_grid_fits_one_screen_and_says_where_its_tokens_are_labelled():
    """Labelled maps need a line a token at 20 px: on a projector BERT's 12 heads stood one a row, 7,048 px tall.
    Now a projector's grid that labelled would not fit one screen is a grid of maps on one colour bar, no taller
    than PROJECTOR_SCREEN_PX, its title saying where the tokens are labelled; a grid that fits keeps its labels."""
    big = interactive.Style(projector=True)
    for heads in (12, 9, 4):
        fig = interactive.head_grid(_random_result(l=1, h=heads, t=16), 0, style=big)
        columns = len({fig.layout[k].domain for k in fig.layout if k.startswith("xaxis")})
        assert fig.layout.height <= layout.PROJECTOR_SCREEN_PX and columns == min(heads, 3 if heads == 9 else 4)
        assert {t.coloraxis for t in fig.data} == {"coloraxis"}  # one colour bar for every map
        assert interactive.ONE_HEAD_LABELLED in fig.layout.title.text
        assert not any(fig.layout[k].showticklabels for k in fig.layout if k.startswith(("xaxis", "yaxis")))
    small = interactive.head_grid(_random_result(l=1, h=4, t=6), 0, style=big)  # fits labelled: keeps its labels
    assert small.layout.height <= layout.PROJECTOR_SCREEN_PX and small.layout.xaxis.showticklabels
    plain = interactive.head_grid(_random_result(l=1, h=12, t=16), 0)  # not a projector: labelled as before
    assert plain.layout.xaxis.showticklabels and interactive.ONE_HEAD_LABELLED not in plain.layout.title.text
    # a page that offers no head drawn alone (Knock out's grid, Start here's, Inside's) sends no one to pick one: the
    # projector's Knock out said "(pick one)" with nothing to pick (Gemma 3, 2026-12-02)
    hinted = 0
    for t in (16, 100, 300):  # on a projector unlabelled on one screen; too many to label; pooled
        for style in (big, interactive.Style()):
            title = interactive.head_grid(_random_result(l=1, h=4, t=t), 0, style=style, pick=False).layout.title.text
            offered = interactive.head_grid(_random_result(l=1, h=4, t=t), 0, style=style).layout.title.text
            assert "pick" not in title and ("pick" in offered) == (title != offered), (t, title, offered)
            hinted += "pick" in offered
    assert hinted >= 4, hinted


def test_projector_mode_scales_every_maps_labels_by_at_least_one_and_a_half():
    r = _random_result(l=1, h=4, t=12)
    plain, big = interactive.Style(), interactive.Style(projector=True)
    for build in (
        lambda s: interactive.head_grid(r, 0, style=s),
        lambda s: interactive.head_map(r, 0, 0, style=s),
        lambda s: interactive.matrix(np.eye(12), "m", rows=list("abcdefghijkl"), style=s),
    ):
        a, b = build(plain), build(big)
        assert b.layout.font.size >= 1.5 * a.layout.font.size
        assert b.layout.height >= a.layout.height


def test_a_matrix_stands_on_the_masked_grey_only_where_it_masks_cells():
    m = np.arange(16, dtype=np.float32).reshape(4, 4)
    for fig in (interactive.matrix(m, "PE"), interactive.matrix(m, "PE", square=True)):
        assert fig.layout.plot_bgcolor == "white" and len(fig.data) == 1  # a grey pad round it: a "masked" frame
    future = np.triu(np.ones((4, 4), dtype=bool), 1)
    scores = np.where(future, -np.inf, m)  # scores with the mask's -inf: those cells are masked too
    toks = list("abcd")
    for fig in (interactive.matrix(m, "w", masked=future, rows=toks, cols=toks), interactive.matrix(scores, "s")):
        grey = fig.data[1]  # the masked cells' own grey trace, over the map, on the map's cells
        assert fig.layout.plot_bgcolor == "white" and grey.name == "masked" and len(fig.data) == 2
        assert np.array_equal(np.asarray(grey.z, dtype=float) == 1, future) and grey.x == fig.data[0].x
        assert fig.layout.xaxis.showgrid is False and fig.layout.yaxis.showgrid is False  # white lines over grey


def test_every_small_matrix_has_a_colour_bar_a_title_in_lines_and_a_stated_label_rule():
    fig = interactive.matrix(
        np.random.rand(64, 32),
        "PE: 64 positions × 32 dimensions, compared each with each",
        rows=[str(i) for i in range(64)],
        cols=[f"d{i}" for i in range(32)],
        style=interactive.Style(),
        signed=False,
    )
    heat = fig.data[0]
    assert heat.showscale is not False and heat.colorbar.title.text == "weight"
    assert "<br>" in fig.layout.title.text  # wrapped to the column, never cut
    assert list(fig.layout.yaxis.tickvals) == [str(i) for i in range(64)]  # the map grows: a line for every row
    labelled = fig.layout.xaxis.tickvals  # 32 columns in a third of the page: every k-th, and the axis says so
    step = int(labelled[1][1:]) - int(labelled[0][1:])
    assert step > 1 and fig.layout.xaxis.title.text == f"every {step}{layout.ordinal(step)} labelled"
    pe = interactive.matrix(np.random.rand(8, 384), "PE", rows=list("abcdefgh"), cols=[f"d{i + 1}" for i in range(384)])
    assert (
        pe.layout.xaxis.showticklabels is False
        and pe.layout.xaxis.title.text == "d1 … d384, too many to label: hover or tap"
    )
    small = interactive.matrix(np.eye(6), "m", rows=list("abcdef"), cols=list("abcdef"))
    assert list(small.layout.yaxis.tickvals) == list("abcdef") and list(small.layout.xaxis.tickvals) == list("abcdef")


def test_positions_against_positions_are_drawn_square_and_labelled_alike_on_both_axes():
    """The Positions page's PE(i)·PE(j) and cosines: a line a row drew 64 positions 4.4 times taller than wide, its
    diagonals steep. Square, the plot is as tall as the columns are wide (plotly holds the cells square), both axes
    labelled every k-th alike, the colour bar as long as the map; the title over the map's grey frame."""
    rows = [str(i) for i in range(64)]
    for style in (interactive.Style(), interactive.Style(projector=True), interactive.Style(phone=True)):
        px = layout.main_px(style) if style.phone else 402
        fig = interactive.matrix(
            np.random.rand(64, 64),
            "learned: cosine(P(i), P(j))",
            rows=rows,
            cols=rows,
            style=style,
            width=px,
            square=True,
        )
        assert (
            fig.layout.yaxis.scaleanchor == "x" and fig.layout.xaxis.constrain == fig.layout.yaxis.constrain == "domain"
        )
        assert list(fig.layout.xaxis.tickvals) == list(fig.layout.yaxis.tickvals) != rows  # every k-th, alike
        said = fig.layout.xaxis.title.text
        assert fig.layout.yaxis.title.text == said and said.startswith("every ") and said.endswith(" labelled")
        side = fig.data[0].colorbar.len
        assert fig.data[0].colorbar.lenmode == "pixels" and 0.4 * px < side < px
        plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b  # less the columns' labels and rule
        assert side < plot_h < side + 0.87 * layout.CHAR * style.font_size * 2 + 3 * style.font_size
        lines = fig.layout.title.text.count("<br>") + 1
        assert fig.layout.margin.t == layout.title_px(style.font_size + 1, lines) + layout.frame_px(style)
    tall = interactive.matrix(np.random.rand(64, 64), "m", rows=rows, cols=rows, width=402)  # not square: a line a row
    assert list(tall.layout.yaxis.tickvals) == rows and tall.layout.yaxis.scaleanchor is None


def test_a_title_of_one_line_hangs_from_the_top_as_one_of_several_does():
    """Plotly sets a one-line title's top 0.3 font sizes over the pad, a wrapped one's first baseline at it (measured
    in Chromium): one pad for both stood one-line titles 9-14 px lower, on their map's frame."""
    for font in (13, 21):
        one, two = layout.title_top(font, 1)["pad"]["t"], layout.title_top(font, 2)["pad"]["t"]
        assert one - round(0.3 * font) == two - font == 8


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
        fig = matrix(
            np.random.rand(16, 16), "softmax: attention weights", rows=labels, cols=labels, style=style, width=px
        )
        assert list(fig.layout.xaxis.tickvals) == labels and list(fig.layout.yaxis.tickvals) == labels
        per_row[style.projector] = k
    assert per_row[False] > per_row[True] >= 1
    many = [f"token{i}" for i in range(60)]  # too many for any column: the axis says its rule
    fig = matrix(np.random.rand(60, 60), "m", rows=many, cols=many, width=maps_a_row(many, 60, most=3)[1])
    assert "labelled" in fig.layout.xaxis.title.text


def test_a_token_axis_gives_each_label_a_line_or_labels_every_kth_and_says_so(bundled_hf):
    """One head's map and a layer's grid of BERT's 16 tokens: every key labelled at 1280x800, on a projector and on a
    phone's 358 px column, whose colour bar lies across the top (down the side it left the keys 8.6 px each for 12 px
    labels, which ran together). A phone's 30 keys on one head's map, or a laptop's 70, are labelled every k-th, and the
    title says so; a laptop's rows too (the map stops at 900 px)."""
    r = bundled_hf.run(bundled_hf.encode(SENTENCE))["self"]
    for style in (interactive.Style(), interactive.Style(projector=True)):
        fig = interactive.head_map(r, 3, 1, style=style)
        assert fig.layout.xaxis.tickmode == "linear" and fig.layout.xaxis.title.text == "key (attended to)"
        assert fig.layout.coloraxis.colorbar.orientation in (None, "v")  # down the side: the room is there
    assert interactive.head_grid(r, 3).layout.xaxis.tickmode == "linear"  # a projector's grid: one screen, unlabelled
    phone = interactive.Style(phone=True)
    fig = interactive.head_map(r, 3, 1, style=phone)
    assert fig.layout.coloraxis.colorbar.orientation == "h"
    assert fig.layout.xaxis.tickmode == "linear" and fig.layout.xaxis.title.text == "key (attended to)"
    assert fig.layout.yaxis.tickmode == "linear"  # every row: the map grows with its rows
    room = layout.PHONE_WIDTH - fig.layout.margin.l - fig.layout.margin.r
    assert room / len(fig.data[0].x) >= phone.font_size + 1
    grid = interactive.head_grid(r, 3, style=phone)
    assert grid.layout.coloraxis.colorbar.orientation == "h" and grid.layout.xaxis12.tickmode == "linear"
    assert "labelled" not in grid.layout.title.text
    thirty = _random_result(l=1, h=2, t=30)
    fig = interactive.head_map(thirty, 0, 0, style=phone)
    assert list(fig.layout.xaxis.tickvals) == list(fig.data[0].x)[::2]
    assert fig.layout.xaxis.title.text == "key (attended to): every 2nd of 30 labelled"
    room = layout.PHONE_WIDTH - fig.layout.margin.l - fig.layout.margin.r
    assert room / len(fig.layout.xaxis.tickvals) >= phone.font_size + 1
    grid = interactive.head_grid(thirty, 0, style=phone)  # 30 rows' labels beside 30 keys' lines do not fit: none
    lines = grid.layout.title.text.split("<br>")  # a phone's title wrapped to its column, never cut
    assert not grid.layout.xaxis2.showticklabels and "too many to label on each map" in " ".join(lines)
    font = phone.font_size + 4
    assert len(lines) > 1 and max(map(len, lines)) * layout.CHAR * font <= layout.PHONE_WIDTH
    assert grid.layout.margin.t >= layout.title_px(font, len(lines)) + layout.BAR_ACROSS_PX  # the bar under its lines
    long = _random_result(l=1, h=1, t=70)
    fig = interactive.head_map(long, 0, 0)
    step = len(fig.data[0].x) // len(fig.layout.xaxis.tickvals)
    assert step >= 2 and fig.layout.xaxis.title.text == f"key (attended to): every {step}nd of 70 labelled"
    assert fig.layout.yaxis.title.text == "query (attending): every 2nd of 70 labelled"  # 900 px tall at most
    thirty = _random_result(l=1, h=1, t=30)  # a projector's 1920x1080 column labels 30 keys each (1,380 px)
    assert interactive.head_map(thirty, 0, 0, style=interactive.Style(projector=True)).layout.xaxis.tickmode == "linear"


def test_a_pooled_head_map_says_it_is_pooled_and_counts_tokens_not_cells():
    """Past 512 tokens a side one head's map is pooled: its title says so and its axes count the tokens (the Heads page
    said "Layer 1, head 2" over Gemma 3's 1,361 tokens in 454 cells of 3, the axes "query (attending): 454"); on a
    phone the longer title wraps in the column."""
    r = _random_result(l=1, h=1, t=600)
    fig = interactive.head_map(r, 0, 0)
    assert np.asarray(fig.data[0].z).shape == (300, 300)
    assert fig.layout.title.text == "Layer 1, head 1 — pooled 2×2 tokens a cell"
    assert fig.layout.yaxis.title.text == "query (attending): 600 tokens, 2 a cell, too many to label: hover or tap"
    assert fig.layout.xaxis.title.text == "key (attended to): 600 tokens, 2 a cell, too many to label: hover or tap"
    phone = interactive.Style(phone=True)
    lines = interactive.head_map(r, 0, 0, style=phone).layout.title.text.split("<br>")
    assert len(lines) == 2 and max(map(len, lines)) * layout.CHAR * (phone.font_size + 4) <= layout.PHONE_WIDTH
    assert interactive.head_map(_random_result(l=1, h=1, t=90), 0, 0).layout.title.text == "Layer 1, head 1"
    tiles = np.random.default_rng(0).random((18, 4, 32, 32))  # a long text's overview (Gemma 3's), cut on a phone
    grid = interactive.overview_maps(tiles, style=phone, note="exact weights, pooled 43×43 tokens a cell")
    lines = grid.layout.title.text.split("<br>")
    assert len(lines) > 1 and max(map(len, lines)) * layout.CHAR * (phone.font_size + 4) <= layout.PHONE_WIDTH


def _causal_result(l=1, h=2, t=10):
    s = torch.randn(l, h, t, t).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    toks = tuple(f"t{i}" for i in range(t))
    return AttentionResult(s.softmax(-1), toks, toks, "causal", "rand")


@pytest.mark.parametrize(("tq", "tk", "fq", "fk", "window"), [(7, 7, 1, 1, 0), (10, 10, 3, 3, 0), (11, 11, 2, 3, 4)])
def test_a_pooled_cell_is_masked_where_the_mask_forbids_every_weight_in_it(tq, tk, fq, fk, window):
    i, j = np.arange(tq)[:, None], np.arange(tk)[None, :]
    forbidden = (j > i) | ((i - j >= window) if window else False)  # the model's own mask, token by token
    cells = interactive.masked_cells(tq, tk, fq, fk, window)
    for a in range(cells.shape[0]):
        for b in range(cells.shape[1]):
            assert cells[a, b] == forbidden[a * fq : (a + 1) * fq, b * fk : (b + 1) * fk].all(), (a, b)


def test_a_causal_heads_future_is_drawn_grey_as_masked_not_as_weight_0():
    r = _causal_result()
    future = np.triu(np.ones((10, 10), dtype=bool), 1)
    for fig, top in (
        (interactive.head_map(r, 0, 1), r.weights[0, 1].max()),
        (interactive.head_grid(r, 0), r.weights.max()),
    ):
        z = array(fig.data[-1].z)  # head 2 in both
        assert np.array_equal(np.isnan(z), future)  # the future left out: the grey ground shows there
        assert np.allclose(np.nansum(z, -1), 1.0, atol=1e-6) and np.allclose(z[~future], r.weights[0, 1][~future])
        assert fig.layout.plot_bgcolor == interactive.MASKED_COLOUR
        assert fig.layout.coloraxis.cmax == pytest.approx(float(top))  # the scale from the weights, not NaN
    pooled = interactive.head_grid(_causal_result(t=300), 0, max_side=96)  # blocks of 4: the diagonal's cells kept
    z = array(pooled.data[0].z)
    assert np.isnan(z).sum() == 75 * 74 // 2 and np.isfinite(np.diag(z)).all()
    bidirectional = _random_result()
    assert not np.isnan(array(interactive.head_map(bidirectional, 0, 0).data[0].z)).any()


def test_a_causal_models_overview_draws_each_tiles_future_grey_and_the_gaps_between_tiles_white():
    r = _causal_result(l=3, h=2, t=6)
    fig = interactive.overview(r)
    z = array(fig.data[0].z)  # 3 x 2 tiles of 6 x 6 cells, one cell apart
    future = np.triu(np.ones((6, 6), dtype=bool), 1)
    for layer in range(3):
        for head in range(2):
            cells = z[layer * 7 : layer * 7 + 6, head * 7 : head * 7 + 6]
            assert np.array_equal(np.isnan(cells), future)
            assert np.allclose(cells[~future], r.weights[layer, head].numpy()[~future])
    grey = array(fig.data[1].z)  # the masked cells' own trace, on no colour axis: the gaps stay on white ground
    assert np.array_equal(grey == 1, np.isnan(z) & (array(fig.data[0].customdata)[..., 0] > 0))
    assert np.isnan(grey[6]).all() and np.isnan(grey[:, 6]).all()  # the gaps: neither map nor grey
    assert fig.data[1].colorscale[0][1] == fig.data[1].colorscale[-1][1] == interactive.MASKED_COLOUR
    assert fig.layout.plot_bgcolor == "white" and fig.data[1].hoverinfo == "skip"
    assert len(interactive.overview(_random_result()).data) == 1  # nothing masked: one map
