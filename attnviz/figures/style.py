"""How every figure looks, browser and export alike: palettes, projector mode, the masked-cell grey, axis labels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnviz.tokens import display_labels


@dataclass(frozen=True)
class Palette:
    """One colour scale under its plotly and its matplotlib name."""

    plotly: str
    matplotlib: str


# name shown to people -> the scale in each library
PALETTES: dict[str, Palette] = {
    "Viridis (colour-blind safe)": Palette("Viridis", "viridis"),
    "Cividis (colour-blind safe)": Palette("Cividis", "cividis"),
    "Blues": Palette("Blues", "Blues"),
    "Magma": Palette("Magma", "magma"),
    "Greys (print)": Palette("Greys", "Greys"),
}
DEFAULT_PALETTE = next(iter(PALETTES))

# Cells a query may not look at (the causal mask): drawn in this grey, never as a low weight.
MASKED_COLOUR = "#c8c8c8"
# The words written in a coloured cell: black or white, whichever stands from the cell by more (WCAG 2's contrast
# ratio). One of the two always reaches 4.58:1, above the 4.5:1 WCAG asks of small text; plotly's own choice (#444 or
# white, by lightness) gave 2.5-2.9:1 on the mid-tones of every palette here.
INKS = ("#000000", "#ffffff")


def luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2's relative luminance of colours (..., 3) in 0..255."""
    c = np.asarray(rgb, dtype=np.float64) / 255.0
    c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return c @ np.array([0.2126, 0.7152, 0.0722])


def light_ink(rgb: np.ndarray) -> np.ndarray:
    """Whether white (True) rather than black stands from each colour (..., 3) by the larger contrast ratio."""
    lum = luminance(rgb)
    return 1.05 / (lum + 0.05) > (lum + 0.05) / 0.05


@dataclass(frozen=True)
class Style:
    """The palette and projector mode a person chose, and whether their browser is a phone's."""

    palette: str = DEFAULT_PALETTE
    projector: bool = False  # large fonts, high contrast, for classrooms
    phone: bool = False  # a phone's narrow screen: a grid of maps stands one a row (layout.PHONE_WIDTH)

    @property
    def colors(self) -> Palette:
        """The chosen palette (the default for a name that is not one)."""
        return PALETTES.get(self.palette, PALETTES[DEFAULT_PALETTE])

    @property
    def colorscale(self) -> str:
        """The plotly colour scale."""
        return self.colors.plotly

    @property
    def cmap(self) -> str:
        """The matplotlib colormap."""
        return self.colors.matplotlib

    @property
    def font_size(self) -> int:
        """Base font size in points."""
        return 20 if self.projector else 12


def pooled_labels(tokens: Sequence[str], factor: int) -> list[str]:
    """Axis labels: one escaped, unique label per token, or "tokens 1–6" per block of `factor` tokens."""
    if factor == 1:
        return display_labels(tokens)
    n = len(tokens)
    return [f"tokens {i + 1}–{min(i + factor, n)}" for i in range(0, n, factor)]


# A long text's pooled maps on a linear scale were one dark colour: a causal row at position i gives its keys about
# 1/i each, so past a few hundred tokens nearly every cell lay under a tenth of the map's top (the first rows' and
# the sink's). On a log scale the previous-token diagonal, the sink's column and the heads' bands show.
LOG_DECADES = 4  # a log scale reaches at most this many powers of ten under the map's largest weight
LOG_LOW_QUANTILE = 0.01  # ... and no lower than the weight that 1% of the cells fall under


@dataclass(frozen=True)
class LogScale:
    """A log colour scale from `low` to `high` (weights > 0): the colours are log10 of the weights, a weight under
    `low` takes the lowest colour (its hover still says its own value), and the colour bar is labelled in weights."""

    low: float
    high: float

    @classmethod
    def of(cls, values: np.ndarray) -> LogScale:
        """The scale for these weights (NaN for masked cells): up to their largest, down to LOG_DECADES under it or
        the LOG_LOW_QUANTILE of the cells above zero, whichever is higher."""
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v) & (v > 0)]
        if v.size == 0:
            return cls(10.0**-LOG_DECADES, 1.0)
        high = float(v.max())
        low = max(float(np.quantile(v, LOG_LOW_QUANTILE)), high / 10.0**LOG_DECADES)
        return cls(low if low < high else high / 10.0, high)

    def colours(self, values: np.ndarray) -> np.ndarray:
        """log10 of the weights, those under `low` raised to it; NaN (masked) stays NaN."""
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return np.log10(np.where(np.isnan(v), np.nan, np.maximum(v, self.low))).astype(np.float32)

    @property
    def range(self) -> tuple[float, float]:
        """The colour axis's ends (cmin, cmax): log10 of `low` and `high`."""
        return math.log10(self.low), math.log10(self.high)

    def ticks(self, most: int = 6, gap: float = 0.0) -> list[float]:
        """The weights the colour bar names, at most `most` and no two closer than `gap` of the bar's length: 1, 2 and
        5 times the powers of ten between `low` and `high`, else 1 and 3 times them, else the powers of ten (every
        other one while too many); the two ends where fewer than two fall between them."""
        lo, hi = self.range

        def fits(marks: list[float]) -> bool:
            steps = np.diff(np.log10(marks)) if len(marks) > 1 else np.array([hi - lo])
            return len(marks) <= most and bool(steps.min() >= gap * (hi - lo) - 1e-9)

        inside: list[float] = []
        for steps in ((1, 2, 5), (1, 3), (1,)):
            marks = [m * 10.0**k for k in range(math.floor(lo), math.ceil(hi) + 1) for m in steps]
            inside = [v for v in marks if self.low * (1 - 1e-9) <= v <= self.high * (1 + 1e-9)]
            if fits(inside):
                break
        while not fits(inside) and len(inside) > 1:
            inside = inside[::2]
        if len(inside) >= 2:
            return inside
        lo, hi = self.range  # a narrow scale (a window of near-even weights): a quarter of the way in from each end
        return [10 ** (lo + (hi - lo) / 4), 10 ** (hi - (hi - lo) / 4)]

    def colorbar(self, most: int = 6, gap: float = 0.0) -> dict:
        """plotly colour bar settings: the tick marks at the weights `ticks` names (at most `most`, `gap` apart),
        labelled as weights with as many digits as tell them apart."""
        ticks = self.ticks(most, gap)
        digits = next((d for d in range(2, 6) if len({weight_text(v, d) for v in ticks}) == len(ticks)), 6)
        texts = [weight_text(v, digits) for v in ticks]
        return {"tickmode": "array", "tickvals": [math.log10(float(t)) for t in texts], "ticktext": texts}  # as said


def weight_text(v: float, digits: int = 2) -> str:
    """A colour bar's weight in `digits` significant digits, short: "0.05", "0.0002", "3e-5" (past four decimals a
    power of ten)."""
    if v >= 1e-4:
        return f"{float(f'{v:.{digits}g}'):f}".rstrip("0").rstrip(".")
    mantissa, exponent = f"{v:.{digits - 1}e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"
