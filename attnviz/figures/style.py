"""How every figure looks, browser and export alike: palettes, projector mode, the masked-cell grey, axis labels."""

from __future__ import annotations

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
