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
            assert fig.layout.height - fig.layout.margin.t == 320 - layout.title_px(font + 1, 1) - 4  # the plot's own
            assert fig.layout.legend.yanchor == "bottom" and fig.layout.legend.y == 1.0
    single = lesson_charts.lines({"q·k": ([0, 1], [1.0, 0.5])}, "q·k against distance", "distance", "q·k")
    assert single.layout.margin.t == layout.title_px(13, 1) + 4  # one line: no legend, no room for one
