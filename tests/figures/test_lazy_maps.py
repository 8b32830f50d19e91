"""A long text's maps: a click on the zoomable map names its block, the exact window keeps its weights."""

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly_data import array


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
    fig = lazy_maps.window_map(
        w, ["<script>x</script>", "it"], ["a", "b"], 1030, 7, np.array([0.5, 0.5]), "t", masked=masked
    )
    z = array(fig.data[0].z)
    assert np.isnan(z[0, 1]) and z[1].tolist() == pytest.approx([0.2, 0.3])  # masked cells are gaps, not zeros
    grey = array(fig.data[2].z)  # ... drawn grey by a trace of their own, on the map's own cells
    assert np.array_equal(grey == 1, masked) and list(fig.data[2].x) == list(fig.data[0].x)
    assert array(fig.data[1].z).ravel().tolist() == [0.5, 0.5]  # what each row gives to keys outside the window
    assert [c for _, c in fig.data[1].colorscale] == ["white", "black"]  # more ink, more weight outside
    assert list(fig.data[0].y) == ["&lt;script&gt;x&lt;/script&gt; ·1031", "it ·1032"]  # positions 1-based
    assert list(fig.data[0].x) == ["a ·8", "b ·9"]


def test_the_zoomable_map_draws_what_the_mask_forbids_grey_the_future_and_beyond_a_sliding_window():
    from attnviz.figures import interactive, lazy_maps
    from attnviz.figures.style import MASKED_COLOUR

    n, f, window = 40, 4, 12  # 10 blocks; a query sees itself and the 11 keys before it
    m = np.ones((10, 10), dtype=np.float32)
    z = array(lazy_maps.zoomable_map(m, f, n, "t", window=window).data[0].z)
    assert np.array_equal(np.isnan(z), interactive.masked_cells(n, n, f, f, window))
    assert np.isnan(z[0, 1]) and np.isnan(z[9, 5]) and not np.isnan(z[9, 6])  # 0-based: query 36 sees keys 25-36
    fig = lazy_maps.zoomable_map(m, f, n, "t", window=window)
    assert fig.data[1].name == "zoom"  # the click markers stay trace 1 (clicked_cell)
    grey = array(fig.data[2].z)  # the masked cells grey, a trace of their own: the plot's white beside the square map
    assert np.array_equal(grey == 1, np.isnan(z)) and fig.data[2].colorscale[0][1] == MASKED_COLOUR
    assert fig.layout.plot_bgcolor == "white"
    bidirectional = lazy_maps.zoomable_map(m, f, n, "t", causal=False)
    assert not np.isnan(array(bidirectional.data[0].z)).any() and len(bidirectional.data) == 2


def test_a_long_text_s_figures_on_a_phone_wrap_their_titles_and_lay_their_colour_bars_across():
    """At a phone's 358 px a long text's one-head map, exact window, attention received and row cut their titles (five
    on Gemma 3's Heads page), the bars down the right took a third of the maps' width, and the one-head map's query
    axis ran from -1,000 to 2,800 round a 1,361-token map: each title now fits its column, each bar lies across the
    top under it, and the map keeps its own range (both axes constrained to its square)."""
    from attnviz.figures import layout, lazy_maps
    from attnviz.figures.style import Style

    phone = Style(phone=True)
    font = phone.font_size + 2
    n, f = 1361, 11
    title = "Layer 1, head 2 — pooled 11×11 tokens a cell; click a cell to zoom"
    m = np.random.default_rng(0).random((124, 124)).astype(np.float32)
    w = np.full((64, 64), 1 / 64, dtype=np.float32)
    figures = {
        "map": lazy_maps.zoomable_map(m, f, n, title, style=phone),
        "window": lazy_maps.window_map(w, ["a"] * 64, ["b"] * 64, 1298, 1298, np.zeros(64), title, style=phone),
        "received": lazy_maps.received_band(np.ones((4, 124)), f, n, "Attention received, layer 1: " * 3, style=phone),
        "row": lazy_maps.row_profile(np.ones(1299) / 1299, ["a"] * 1299, 1298, title, style=phone),
    }
    for name, fig in figures.items():
        lines = fig.layout.title.text.split("<br>")
        assert len(lines) > 1 and max(map(len, lines)) * layout.CHAR * font <= layout.PHONE_WIDTH, name
        assert fig.layout.margin.t >= layout.title_px(font, len(lines)), name  # the lines above the plot
        if name != "row":  # a heatmap's bar across the top, under the title's last line
            bar = fig.layout.coloraxis.colorbar if name == "window" else fig.data[0].colorbar
            assert bar.orientation == "h" and fig.layout.margin.t >= layout.title_px(font, len(lines)) + 46, name
    square = figures["map"].layout
    assert square.yaxis.constrain == "domain" == square.xaxis.constrain and list(square.yaxis.range) == [n + 0.5, 0.5]
    laptop = lazy_maps.zoomable_map(m, f, n, title)  # a laptop's: one line, the bar down the right as before
    assert laptop.layout.title.text == title and laptop.data[0].colorbar.orientation is None


def test_the_attention_received_band_s_colour_bar_has_room_for_its_labels_with_few_heads():
    """Gemma 3's 4 heads on a projector: the bar stood 43 px under its title "received", its four 20 px labels on one
    another (seen in Chromium, 2026-12-02). The title stands beside the bar, which is as long as the plot, and plotly
    is asked for no more labels than one a line and a half of the plot's height."""
    from attnviz.figures import lazy_maps
    from attnviz.figures.style import Style

    for style in (Style(), Style(projector=True)):
        for heads in (4, 9, 12):
            fig = lazy_maps.received_band(np.full((heads, 100), 0.015), 4, 400, "Attention received", style=style)
            bar = fig.data[0].colorbar
            plot = fig.layout.height - 140  # the band's own rows (the rest: title, axis and margins)
            assert bar.title.side == "right" and bar.nticks >= 2
            assert plot / bar.nticks >= 1.5 * style.font_size, (style.projector, heads, plot, bar.nticks)


def _long_rows(n: int = 300) -> np.ndarray:
    """A causal head's weights over a long text, each query spread evenly over what it sees: row i gives 1/i each."""
    w = np.tril(np.ones((n, n), dtype=np.float32))
    return w / w.sum(1, keepdims=True)


def test_a_log_scale_reaches_four_powers_of_ten_or_the_lowest_percent_and_names_weights_on_its_bar():
    from attnviz.figures.style import LOG_DECADES, LogScale, weight_text

    w = _long_rows()
    scale = LogScale.of(np.where(w > 0, w, np.nan))
    assert scale.high == pytest.approx(1.0) and scale.low == pytest.approx(np.quantile(w[w > 0], 0.01), rel=1e-6)
    assert LogScale.of(np.array([1.0, 1e-9, 1e-9])).low == pytest.approx(10.0**-LOG_DECADES)  # no further down
    assert LogScale.of(np.array([np.nan, 0.0])) == LogScale(10.0**-LOG_DECADES, 1.0)  # nothing to scale: a default
    colours = scale.colours(np.array([0.5, np.nan, 0.0, 1e-12]))
    assert colours[0] == pytest.approx(np.log10(0.5)) and np.isnan(colours[1])  # masked stays masked
    assert colours[2] == colours[3] == pytest.approx(np.log10(scale.low))  # under the scale: its lowest colour
    for low, high in ((2e-4, 0.06), (1.5e-5, 0.06), (1e-5, 1.0), (0.01, 0.02), (0.011, 0.019)):
        ticks = LogScale(low, high).ticks()
        assert 2 <= len(ticks) <= 6 and ticks == sorted(ticks), (low, high, ticks)
        assert all(low * 0.999 <= v <= high * 1.001 for v in ticks) or ticks == [low, high]
    assert [weight_text(v) for v in LogScale(2e-4, 0.06).ticks()] == ["0.0003", "0.001", "0.003", "0.01", "0.03"]
    assert [weight_text(v) for v in (1.0, 0.05, 1e-4, 3e-5, 1e-6)] == ["1", "0.05", "0.0001", "3e-5", "1e-6"]


def test_log_colours_recolours_every_weight_map_keeps_masked_cells_and_hovers_each_weight():
    """The zoomable map (a bar of its own), a layer's grid and the overview (a shared colour axis; the overview's
    customdata keeps its layer and head) and the attention received, all on one log scale; the masked grey is not a
    weight map and stays as it was."""
    from attnviz.figures import interactive, layout, lazy_maps

    n, f = 300, 10
    w = _long_rows(n)
    pooled = w.reshape(n // f, f, n // f, f).mean((1, 3))
    head = lazy_maps.zoomable_map(pooled, f, n, "t")
    grey_before = array(head.data[2].z).copy()
    layout.log_colours(head, "mean weight")
    shown = head.data[0]
    seen = ~np.isnan(array(shown.z))
    assert np.array_equal(seen, ~interactive.masked_cells(n, n, f, f))  # the future still masked, nothing else
    np.testing.assert_allclose(array(shown.customdata)[seen], pooled[seen], rtol=1e-6)
    assert shown.colorbar.title.text == "mean weight (log scale)" and shown.hoverinfo == "skip"  # the markers' hover
    assert (shown.zmin, shown.zmax) == pytest.approx(
        (np.log10(np.quantile(pooled[seen], 0.01)), np.log10(pooled.max())), abs=1e-6
    )
    assert np.array_equal(array(head.data[2].z), grey_before, equal_nan=True)  # the grey trace untouched
    grid = layout.log_colours(interactive.maps_grid(np.stack([pooled, pooled]), ("a",) * n, ("a",) * n, f, f, 0))
    assert (
        grid.layout.coloraxis.colorbar.title.text == "weight (log scale)"
        and grid.layout.coloraxis.cmax == pytest.approx(np.log10(pooled.max()))
    )
    assert all("customdata" in t.hovertemplate for t in grid.data if t.name != "masked")
    overview = layout.log_colours(interactive.overview_maps(np.stack([[pooled, pooled]]), masked=None))
    data = array(overview.data[0].customdata)
    assert data.shape[-1] == 3 and "customdata[0]" in overview.data[0].hovertemplate  # layer, head, then the weight
    assert "customdata[2]:.3g" in overview.data[0].hovertemplate
    at = np.nonzero(np.isfinite(array(overview.data[0].z)))
    np.testing.assert_allclose(
        10 ** array(overview.data[0].z)[at], np.maximum(data[..., 2][at], 10**overview.layout.coloraxis.cmin), rtol=1e-5
    )
    band = layout.log_colours(lazy_maps.received_band(w.mean(0, keepdims=True), 1, n, "t"), "received")
    assert band.data[0].colorbar.title.text == "received (log scale)" and band.data[0].colorbar.title.side == "right"
    empty = go.Figure(go.Scatter(x=[1], y=[1]))
    assert layout.log_colours(empty) is empty  # no map: nothing to do


def test_a_phones_log_bar_lies_across_the_column_titled_in_two_lines_with_at_most_four_marks():
    """On a 390 px phone the bar's title in one line beside it left the bar 70 px, its six marks turned on end, and
    the exact window's bar (from its plot's left, right of 64 tokens' labels) was 60 px long."""
    from attnviz.figures import layout, lazy_maps
    from attnviz.figures.layout import PHONE_WIDTH
    from attnviz.figures.style import LogScale, Style

    n, f = 300, 10
    pooled = _long_rows(n).reshape(n // f, f, n // f, f).mean((1, 3))
    phone = Style(phone=True)
    bar = layout.log_colours(lazy_maps.zoomable_map(pooled, f, n, "t", style=phone), "mean weight").data[0].colorbar
    assert bar.orientation == "h" and bar.title.text == "mean weight<br>(log scale)" and 2 <= len(bar.ticktext) <= 4
    assert bar.xref == "container" and bar.lenmode == "pixels" and bar.len >= 0.8 * PHONE_WIDTH
    w = _long_rows(n)[-64:, -64:]
    window = lazy_maps.window_map(w, ["a"] * 64, ["b"] * 64, n - 64, n - 64, 1 - w.sum(1), "t", style=phone)
    bar = layout.log_colours(window).layout.coloraxis.colorbar
    assert bar.xref == "container" and bar.len >= 0.8 * PHONE_WIDTH and bar.title.text == "weight<br>(log scale)"
    laptop = layout.log_colours(lazy_maps.zoomable_map(pooled, f, n, "t")).data[0].colorbar
    assert laptop.orientation is None and laptop.title.text == "weight (log scale)" and len(laptop.ticktext) <= 6
    narrow = LogScale(0.00056, 0.00058).colorbar()  # near-even weights: two marks inside, told apart, where they say
    assert narrow["ticktext"] == ["0.00056", "0.00057"]
    assert narrow["tickvals"] == pytest.approx(list(np.log10([0.00056, 0.00057])))


def test_the_zoomable_maps_hover_is_its_markers_each_cell_with_its_tokens_and_weight():
    """Over a cell plotly's hover picked the click markers (their hover off), never the map: no hover showed. Each
    marker now says its cell's queries, keys and weight (masked cells say so), in the order clicked_cell reads."""
    from attnviz.figures import lazy_maps

    n, f = 10, 4
    m = np.array([[0.5, 0.0, 0.0], [0.25, 0.125, 0.0], [0.1, 0.2, 0.000123456]], dtype=np.float32)
    fig = lazy_maps.zoomable_map(m, f, n, "t")
    markers = fig.data[1]
    assert markers.hovertemplate == "%{text}<extra></extra>" and markers.hoverinfo != "none"
    assert markers.text[0] == "queries 1–4<br>keys 1–4<br>mean weight 0.5"
    assert markers.text[1] == "queries 1–4<br>keys 5–8<br>masked: not seen"  # the future: wholly after every query
    assert markers.text[8] == "queries 9–10<br>keys 9–10<br>mean weight 0.000123"
    assert fig.data[0].hoverinfo == "skip"
    one = lazy_maps.zoomable_map(np.array([[1.0, 0.0], [0.3, 0.7]]), 1, 2, "t").data[1].text
    assert list(one) == [
        "query 1<br>key 1<br>weight 1",
        "query 1<br>key 2<br>masked: not seen",
        "query 2<br>key 1<br>weight 0.3",
        "query 2<br>key 2<br>weight 0.7",
    ]


def test_a_short_bars_log_marks_are_as_few_and_as_far_apart_as_its_builder_says_fit():
    """The attention received's bar is a few heads' rows tall (its nticks): Gemma 3's 4 rows had 6 marks on one
    another at 900 px, then 0.001 and 0.003 ran together on a projector's 120 px bar."""
    from attnviz.figures import layout, lazy_maps
    from attnviz.figures.style import LogScale, Style

    assert LogScale(1e-4, 0.02).ticks() == pytest.approx([1e-4, 3e-4, 1e-3, 3e-3, 0.01])
    assert LogScale(1e-4, 0.02).ticks(4, 1 / 4) == pytest.approx([1e-4, 1e-3, 0.01])  # a decade: 0.43 of the bar
    received = np.geomspace(0.02, 1e-4, 400).reshape(4, 100)  # 4 heads
    for style in (Style(), Style(projector=True)):
        band = lazy_maps.received_band(received, 1, 100, "t", style=style)
        fits = band.data[0].colorbar.nticks
        shown = layout.log_colours(band, "received").data[0]
        marks, length = np.array(shown.colorbar.tickvals), shown.zmax - shown.zmin
        assert 2 <= len(marks) <= fits and np.diff(marks).min() >= length / fits - 1e-6, (style, marks, fits)
