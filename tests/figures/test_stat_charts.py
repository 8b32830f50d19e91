"""A layer x head grid of a statistic: each head's label fits its cell, on a projector too."""

import numpy as np


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
        assert size * CHAR * len("street") <= STAT_GRID_PX[style.projector] / 12
        assert size <= style.font_size - 2
    # a projector's 1920x1080 screen: a 12-head model's kinds 16 px or more ("previous-" the longest line)
    kinds = [["previous-token", "broad"] * 6 for _ in range(6)]
    assert stat_grid(np.zeros((6, 12)), kinds, "entropy", style=Style(projector=True)).data[0].textfont.size >= 16
    many = [f"t{i}" for i in range(80)]
    fig = side_by_side([Panel("one", np.zeros((80, 80)), many, many)])
    assert fig.layout.xaxis.title.text == "key: 80 tokens, too many to label"
    assert fig.layout.yaxis.title.text == "query: 80 tokens"


def _wcag_ratio(a, b) -> float:
    """WCAG 2's contrast ratio of two colours in 0..255, written out here apart from the code it checks."""

    def lum(c):
        r, g, b = ((v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4) for v in (x / 255 for x in c))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_head_grids_words_stand_from_their_cell_s_colour_in_every_palette():
    """Each line a cell writes is black or white, whichever stands from that cell's colour by more: 4.5:1 or more
    (WCAG's least for small text) in every palette, on every shade of the scale. Plotly's own choice (#444 or white
    by lightness) gave 2.5-2.9:1 on the mid-tones; the value's line and the label's are both coloured."""
    import re

    from plotly.colors import sample_colorscale

    from attnviz.figures.stat_charts import stat_grid
    from attnviz.figures.style import PALETTES, Style

    values = np.linspace(0.0, 2.5, 101).reshape(101, 1)  # 101 layers of one head: every shade, words that fit
    for name, palette in PALETTES.items():
        fig = stat_grid(values, [["previous-token"]] * 101, "entropy", style=Style(palette=name))
        colours = sample_colorscale(palette.plotly, list(np.linspace(0, 1, 101)))
        for (text,), colour in zip(fig.data[0].text, colours, strict=True):
            inks = re.findall(r'<span style="color:(#[0-9a-f]{6})">', text)
            assert len(inks) == text.count("<br>") + 1 == 2, text  # "previous-token" (a cell wide enough), the value
            cell = [float(v) for v in re.findall(r"[0-9.]+", colour)]
            worst = min(_wcag_ratio([int(ink[i : i + 2], 16) for i in (1, 3, 5)], cell) for ink in inks)
            assert worst >= 4.5, (name, colour, text)
        assert fig.data[0].zmin == 0.0 and fig.data[0].zmax == 2.5  # the scale the inks were chosen on
        assert "<span" not in fig.data[0].hovertemplate and fig.data[0].customdata[0][0] == "previous-token"


def test_a_phone_s_head_grid_stands_heads_down_where_they_outnumber_the_layers_and_drops_words_that_do_not_fit():
    """On a phone's 358 px column BERT's 12 heads made 20 px columns and each cell's words ran into the next: its grid
    stands with heads as rows (6 columns of layers); SmolLM2's 30 layers x 9 heads keep their rows, and its 35 px
    cells leave "previous-token" out (the title says a tap shows it); a click reads (layer, head) either way."""
    from attnviz.figures.layout import CHAR
    from attnviz.figures.stat_charts import head_at, stat_grid
    from attnviz.figures.style import Style

    phone = Style(phone=True)
    values = np.arange(72, dtype=np.float32).reshape(6, 12)
    labels = [[f"l{layer}h{h}" for h in range(12)] for layer in range(6)]
    fig = stat_grid(values, labels, "entropy", style=phone)
    hm = fig.data[0]
    assert list(hm.x) == [f"L{i}" for i in range(1, 7)] and list(hm.y) == [f"H{i}" for i in range(1, 13)]
    assert np.asarray(hm.z)[4, 1] == values[1, 4] and "l1h4" in hm.text[4][1] and hm.customdata[4][1] == "l1h4"
    assert hm.colorbar.orientation == "h" and not fig.layout.title.text  # the bar across the top; every word shown
    assert head_at({"x": "L2", "y": "H5"}) == (2, 5) == head_at({"x": "H5", "y": "L2"})
    laptop = stat_grid(values, labels, "entropy").data[0]
    assert list(laptop.x) == [f"H{i}" for i in range(1, 13)] and laptop.colorbar.orientation != "h"
    for style in (Style(), Style(projector=True)):  # a laptop's and a projector's BERT grid keep every word
        kinds = stat_grid(values, [["previous-token"] * 12] * 6, "entropy", style=style)
        assert "previous-<" in kinds.data[0].text[0][0] and not kinds.layout.title.text

    kinds = [["previous-token", "other", "sink"] * 3 for _ in range(30)]
    fig = stat_grid(np.ones((30, 9)), kinds, "entropy", style=phone)
    assert list(fig.data[0].x) == [f"H{i}" for i in range(1, 10)]  # more layers than heads: as on a laptop
    assert "previous" not in fig.data[0].text[0][0] and "1.00" in fig.data[0].text[0][0]
    assert fig.layout.title.text == "Tap a head for its label"
    # Gemma 3's 4 heads: the words fit a cell, broken after the hyphen
    fig = stat_grid(np.ones((18, 4)), [["previous-token"] * 4] * 18, "entropy", style=phone)
    size = fig.data[0].textfont.size
    assert "previous-<" in fig.data[0].text[0][0] and size >= 8 and CHAR * size * len("previous-") <= 358 / 4 - 10


def test_a_bar_charts_title_breaks_into_lines_its_column_holds_and_the_bars_keep_their_height():
    """Gemma 3's Model overview titled its rollout bars "'<bos>' after layer 18: rollout share per input token", one
    line 8 px wider than a phone's 358 px column (Chromium cut it at both ends): the title breaks into lines that fit
    the page's column, and the bars' own height stays what it is under a title of one line."""
    from html import unescape

    from attnviz.figures.layout import CHAR, main_px
    from attnviz.figures.stat_charts import bars
    from attnviz.figures.style import Style

    title = "'<bos>' after layer 18: rollout share per input token"
    tokens = ("<bos>", "The", "animal")
    heights = set()
    for style, n_lines in ((Style(), 1), (Style(projector=True), 2), (Style(phone=True), 2)):
        fig = bars(np.array([0.5, 0.3, 0.2]), tokens, title, style=style)
        lines = fig.layout.title.text.split("<br>")
        assert len(lines) == n_lines, (style, lines)
        font = fig.layout.title.font.size
        assert all(CHAR * font * len(unescape(line)) <= main_px(style) for line in lines)
        assert fig.layout.title.text.startswith("&#x27;&lt;bos&gt;&#x27;")  # escaped: a token is plotly's text
        heights.add(fig.layout.height - fig.layout.margin.t - fig.layout.margin.b)
    assert heights == {270 - 10}
