"""How a figure is laid out for the page it stands in: the main column's measured width, the pixels a token's label
needs, a title over a map, the colour axis and fonts a style gives. Shared by the figure builders."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from html import unescape

import numpy as np
import plotly.graph_objects as go

from attnviz.escape import html_text
from attnviz.figures.style import LogScale, Style

GRID_WIDTH = 900  # px: the width a grid is laid out for (it holds at MAIN_PX[False], 820, where it is drawn)
PHONE_WIDTH = 358  # px: a 390 px phone's main column (Streamlit's 16 px a side), where a grid is one map a row
MAIN_PX = {False: 820, True: 740}  # px of the main column measured in Chromium at 1280x800, sidebar open (projector?)
PROJECTOR_SCREEN_PX = 960  # px of a projected 1920x1080 page a figure may take and still be seen whole
PROJECTOR_MAIN_PX = 1380  # px of the main column measured in Chromium at 1920x1080 in projector mode, sidebar open
EVERY_LABEL = 64  # a token axis this long or shorter labels every token, on every map; longer ones label none
CHAR = 0.62  # a label character's width, in font sizes (about)
# a category axis labelling every token, none thinned
EVERY_TICK: dict[str, object] = {"tickmode": "linear", "tick0": 0, "dtick": 1}
COLUMN_PX = 300  # px of the page's column a small map stands in by default: a third of the main column
COLUMN_GAP = 16  # px between Streamlit's columns


def main_px(style: Style) -> int:
    """The px of the main column a figure of this style is laid out for: a phone's, a projector's or a laptop's."""
    return PHONE_WIDTH if style.phone else MAIN_PX[style.projector]


def column_px(style: Style, across: int = 2) -> int:
    """The px of one of `across` columns of the main column laid out for this style (a phone's columns stack: the
    whole column)."""
    main = main_px(style)
    return main if style.phone else (main - COLUMN_GAP * (across - 1)) // across


def title_top(font: int, lines: int = 1) -> dict[str, object]:
    """A title whose block's top stands 8 px under the figure's top, with title_px of margin above the plot. Plotly
    centres a title's first line in the top margin by default, so a wrapped title ran down over the map. Anchored at
    the top, plotly sets a title of several lines with its first baseline at the pad (the block's top one font size
    above it), but a title of one line with its top 0.3 font sizes above the pad (measured in Chromium): with one pad
    for both, a one-line title stood 9 px lower than its margin allowed (14 in projector mode), on the map's frame."""
    pad = 8 + (round(0.3 * font) if lines == 1 else font)
    return {"y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": pad}}


def title_lines(title: str, width: int, font: int) -> list[str]:
    """`title` in lines that fit a figure `width` px wide at `font` px: never cut. One line at a time, a phone's 358 px
    cut "'<bos>' after layer 18: rollout share per input token" (Gemma 3's Model overview) at both ends."""
    return textwrap.wrap(title, max(16, int(0.85 * width / (CHAR * font)))) or [""]


def frame_px(style: Style) -> int:
    """The grey frame round a map: Streamlit's theme pads a plot's area (its layout's margin.pad) by 8 px, 12 in
    projector mode (measured in Chromium), and the map's grey ground fills the pad. A title stands over it."""
    return 12 if style.projector else 8


def title_px(font: int, lines: int) -> int:
    """The top margin a title_top title of `lines` lines needs: plotly sets a line 1.3 of its font apart."""
    return round(8 + 1.3 * font * lines + 14)


def labels_fit(n_tokens: int, font: int) -> int:
    """Pixels a map's side needs to give each of its tokens one line of label."""
    return n_tokens * (font + 1)


def drawn_chars(labels: Sequence[str]) -> int:
    """The most characters a label of `labels` shows as drawn: escaped for plotly ("&lt;/s&gt; ·26", tokens.
    display_labels), it is "</s> ·26" on the screen. Measured escaped, the date model's rows took 132 of a phone's
    358 px (panel_maps)."""
    return max((len(unescape(x)) for x in labels), default=0)


def row_label_px(rows: Sequence[str] | None, font: int) -> float:
    """Pixels a map's row labels take on its left (none past EVERY_LABEL rows: they are not drawn)."""
    if not rows or len(rows) > EVERY_LABEL:
        return 0.0
    return CHAR * font * drawn_chars(rows) + 6


def bar_px(font: int) -> float:
    """Pixels a small map's colour bar takes on its right, with its tick labels and title."""
    return 5.5 * font


def token_ticks(labels: Sequence[str], px: float, font: int, title: str, most: int = EVERY_LABEL) -> dict:
    """A token axis `px` long: every token labelled where each has a label's line, else every k-th, and the axis title
    says so; past `most` tokens none, and the title says that."""
    n = len(labels)
    if n > most:
        return {"showticklabels": False, "title": {"text": f"{title}: {n} tokens, too many to label"}}
    step = max(1, math.ceil(labels_fit(n, font) / max(1.0, px)))
    if step == 1:
        return {"showticklabels": True, "title": {"text": title}, **EVERY_TICK}
    shown = list(labels[::step])
    return {
        "showticklabels": True,
        "tickmode": "array",
        "tickvals": shown,
        "ticktext": shown,
        "title": {"text": f"{title}: every {step}{ordinal(step)} of {n} labelled"},
    }


def ordinal(n: int) -> str:
    """The suffix after n in "every n-th label": "nd" for 2 and 22, "rd" for 3 and 23, else "th"."""
    return "nd" if n % 10 == 2 and n % 100 != 12 else "rd" if n % 10 == 3 and n % 100 != 13 else "th"


def style_layout(fig: go.Figure, style: Style, zmax: float, title: str) -> go.Figure:
    """A map's title, fonts, colour axis (0 to zmax, the style's scale) and white ground; queries top to bottom."""
    fig.update_layout(
        title={"text": html_text(title), "font": {"size": style.font_size + 4}},
        font={"size": style.font_size, "color": "black" if style.projector else None},
        coloraxis={
            "colorscale": style.colorscale,
            "cmin": 0.0,
            "cmax": zmax,
            "colorbar": {"title": {"text": "weight"}, "thickness": 24 if style.projector else 14},
        },
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def log_colours(fig: go.Figure, what: str = "weight") -> go.Figure:
    """The figure's weight maps (its heatmaps on the colour axis, or with a colour bar of their own) coloured on one
    log scale (style.LogScale), the bar labelled in weights and titled "`what` (log scale)"; each cell's hover still
    says its own weight, from customdata (a map's own customdata keeps its channels, the weight added last). Masked
    cells stay NaN (grey)."""
    maps = [t for t in fig.data if isinstance(t, go.Heatmap) and (t.coloraxis or t.showscale is not False)]
    if not maps:
        return fig
    scale = LogScale.of(np.concatenate([np.asarray(t.z, dtype=np.float32).ravel() for t in maps]))
    low, high = scale.range

    def bar(old) -> dict:
        """The bar's marks and title: no more marks than the builder said fit, and as far apart as that many spread
        evenly (its nticks: the attention received's bar is a few heads' rows tall, and Gemma 3's 4 rows had 6 marks
        on one another, then 0.001 and 0.003 on a projector's 120 px); laid across a phone's figure
        (bar_across), its title in two lines beside it, at most 4 marks, each written right of its own (in one line
        the title left the bar 70 px of a phone's 358, its 6 marks turned on end; the first mark, centred, ran into
        the title)."""
        most, gap = (min(6, old.nticks), 1 / old.nticks) if old.nticks else (6, 0.0)
        if old.orientation != "h":
            return scale.colorbar(most, gap) | {"title": {"text": f"{what} (log scale)"}}
        across = {"title": {"text": f"{what}<br>(log scale)"}, "ticklabelposition": "outside right"}
        return scale.colorbar(min(most, PHONE_BAR_MARKS), gap) | across

    for t in maps:
        z = np.asarray(t.z, dtype=np.float32)
        if t.customdata is None:
            data, ref = z, "%{customdata:.3g}"
        else:
            own = np.asarray(t.customdata)
            data, ref = (
                np.concatenate([own.astype(np.float32), z[..., None]], axis=-1),
                f"%{{customdata[{own.shape[-1]}]:.3g}}",
            )
        t.update(
            z=scale.colours(z), customdata=data, hovertemplate=re.sub(r"%\{z(:[^}]*)?\}", ref, t.hovertemplate or "")
        )
        if not t.coloraxis:
            t.update(zmin=low, zmax=high, colorbar=bar(t.colorbar))
    if any(t.coloraxis for t in maps):
        fig.update_layout(coloraxis={"cmin": low, "cmax": high, "colorbar": bar(fig.layout.coloraxis.colorbar)})
    return fig


PHONE_BAR_MARKS = 4  # the most weights a log scale's bar names across a phone's figure


BAR_ACROSS_PX = 46  # a colour bar laid across a phone's figure: the bar (its title on its right) and its tick labels


def bar_across(fig: go.Figure, style: Style, title_lines: int = 1, below: int = 0) -> go.Figure:
    """A phone's colour bar laid across the figure under its title, not down its right side, where it took about 100
    of the column's 358 px from the maps (a map then gave BERT's 16 keys 9.9 px each). The figure grows BAR_ACROSS_PX
    taller: the title (`title_lines` of it) at the top, the bar, `below` px (a map's own title), then the maps."""
    font = style.font_size + 4  # style_layout's title
    above = title_px(font, title_lines)
    height = int(fig.layout.height or 450) + BAR_ACROSS_PX
    fig.update_layout(
        title=title_top(font, title_lines),
        height=height,
        margin={"t": above + BAR_ACROSS_PX + below},
        coloraxis_colorbar={
            "orientation": "h",
            "thickness": 10,
            "len": 0.9,  # its title beside it
            "x": 0.0,
            "xanchor": "left",
            "y": 1 - (above + 6) / height,
            "yref": "container",
            "yanchor": "top",
            "title": {"side": "right"},
        },
    )
    return fig


def title_over(text: str, x: float, y: float, **extra) -> dict:
    """An annotation centred above a map, at paper coordinates (x, y)."""
    return {
        "text": text,
        "x": x,
        "y": y,
        "xref": "paper",
        "yref": "paper",
        "xanchor": "center",
        "yanchor": "bottom",
        "showarrow": False,
        **extra,
    }
