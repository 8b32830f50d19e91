"""The lessons' line charts: a legend's rows have room between the chart's title and its plot."""

from attnviz.figures import layout, lesson_charts
from attnviz.figures.style import Style
from attnviz.lessons.kernels import MaskCost


def _rows() -> list:
    return [
        MaskCost(n=n, method=m, ms=float(n) / k, scores_mb=n / 64 / k, peak_mb=None)
        for n in (256, 512, 1024, 2048)
        for m, k in (("dense + mask", 1), ("sliding window (blocked)", 4), ("block-sparse (blocked)", 3))
    ]


def test_a_legend_s_rows_are_counted_as_plotly_sets_them():
    """One row where the entries fit side by side; else columns as wide as the widest entry, as many a row as fit
    (measured in Chromium: the Masks page's five lines in half a laptop's column stood five rows, its three three)."""
    names = ["∝ N²", "∝ N", "dense + mask", "sliding window (blocked)", "block-sparse (blocked)"]
    half = layout.column_px(Style())
    assert lesson_charts.legend_rows(names, half, 12) == 5
    assert lesson_charts.legend_rows(names[2:], half, 12) == 3
    assert lesson_charts.legend_rows(["before", "after"], half, 12) == 1
    assert lesson_charts.legend_rows(names, 1380, 12) == 1 and lesson_charts.legend_rows([], half, 12) == 0


def test_the_cost_of_masks_makes_room_for_its_legends_over_the_plot():
    """The legend's rows in the top margin under the title, the plot as tall as before: they rose over the title."""
    for style in (Style(), Style(projector=True), Style(phone=True)):
        width = layout.column_px(style)
        time_fig, mem_fig = lesson_charts.mask_cost_chart(_rows(), style=style, width=width)
        font = style.font_size
        for fig, names in ((time_fig, 5), (mem_fig, 3)):
            entries = [t.name for t in fig.data]
            assert len(entries) == names
            rows = lesson_charts.legend_rows(entries, width, font)
            assert fig.layout.margin.t == layout.title_px(font + 1, 1) + rows * (font + 8) + 4
            own = lesson_charts.grown(320, style) - layout.title_px(font + 1, 1) - 4  # the plot alone
            assert fig.layout.height - fig.layout.margin.t == own
            assert fig.layout.legend.yanchor == "bottom" and fig.layout.legend.y == 1.0
    single = lesson_charts.lines({"q·k": ([0, 1], [1.0, 0.5])}, "q·k against distance", "distance", "q·k")
    assert single.layout.margin.t == layout.title_px(13, 1) + 4  # one line: no legend, no room for one


def test_the_cost_of_heads_names_its_bars_in_lines_a_phone_holds_and_hides_times_too_small_to_read():
    """A phone's fifth of 358 px: "16 Q / 1 K/V heads" in one line ran under the toolbar and the times over the bars
    shrank to 5 px; "1 heads" said so. The names now break, the times hide below the font less 2 (hover says them),
    the legend stands over the plot, and a projector's chart grows with its text."""
    from attnviz.lessons.cost import HeadsCost

    rows = [
        HeadsCost(heads=h, kv_heads=kv, method=m, n=512, ms=float(h), peak_mb=None, weights_mb=1.0, kv_mb=1.0)
        for m, h, kv in (("batched", 1, 1), ("loop over heads", 1, 1), ("batched", 16, 16), ("batched", 16, 4))
    ]
    for style in (Style(), Style(phone=True), Style(projector=True)):
        fig = lesson_charts.heads_cost_chart(rows, style=style)
        names = [x for t in fig.data for x in t.x]
        assert names == ["1 head", "16 heads", "16 Q,<br>4 K/V", "1 head"]
        assert max(len(line) for name in names for line in name.split("<br>")) <= 8
        assert fig.layout.uniformtext.mode == "hide" and fig.layout.uniformtext.minsize == style.font_size - 2
        assert fig.layout.legend.y == 1.0 and fig.layout.xaxis.title.text.startswith("Q: query heads")
        assert fig.layout.height == lesson_charts.grown(340, style)
