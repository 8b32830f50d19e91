"""How every figure looks, browser and export alike: palettes, projector mode, the masked-cell grey, axis labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
