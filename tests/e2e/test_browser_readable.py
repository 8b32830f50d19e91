"""What a person sees of every page's first draw in Chromium: colour bars, labels not cut, off the plot and apart, at
1280x800, on a projector and on a phone."""

from __future__ import annotations

import pytest
from browsing import (
    READABLE_GEMMA3,
    READABLE_ONCE,
    READABLE_PAGES,
    SLOW_BROWSER,
    _check_readable,
    _readable,
    converted_first,
)

pytestmark = SLOW_BROWSER


@pytest.mark.parametrize("model", ["model=default", "model=smollm2&backend=hf", "model=gemma3"])
def test_every_map_has_a_colour_bar_no_label_is_cut_and_a_projector_enlarges_tick_labels(browser, server, model):
    """Each page's first draw at 1280x800, then in projector mode (switched on in the same page): every heatmap figure
    has a colour bar (a grid's maps share one), no heading or widget label is clipped, and the projector's tick labels
    are at least 1.5x."""
    converted_first(model)
    for path in READABLE_PAGES:
        if path in READABLE_ONCE and model != "model=default":
            continue
        if model == "model=gemma3" and path not in READABLE_GEMMA3:
            continue
        plain, big = _readable(browser, server, path, model)
        _check_readable(path, plain, big, maps=True)


# About 900 of SmolLM2's tokens: past what the default ATTNVIZ_EAGER_MB holds whole (688), so the page takes the long
# path (pooled maps, an exact window, one query's row) that no visit above reaches
LONG_TEXT = "The teacher said that attention lets each token look back at the others, and the students asked why. " * 45
# About 1,600 of Gemma 3's: past its 1,365 and its sliding window of 512, so the windowed layers' maps are drawn
LONG_GEMMA3 = LONG_TEXT * 2


@pytest.mark.parametrize(
    "view, model",
    [
        ("Head", "model=smollm2&backend=hf"),
        ("Layer", "model=smollm2&backend=hf"),
        ("Overview", "model=smollm2&backend=hf"),
        ("Layer", "model=gemma3"),
        ("Head", "model=gemma3"),
    ],
)
def test_a_long_text_s_maps_are_read_whole_on_a_laptop_a_phone_and_a_projector(browser, server, view, model):
    """The long path's figures (lazy_maps) as every page's above: on a phone five titles were cut at 358 px and the
    colour bars took a third of the maps' width (found by eye on 2026-12-01, no visit reached them). Gemma 3's layer 1
    has a sliding window (its masked keys, its window's note) and 4 heads: the attention-received band's colour bar
    had 43 px on a projector for four labels of 20 px (found by eye on 2026-12-02)."""
    import urllib.parse

    converted_first(model)
    text = LONG_GEMMA3 if model == "model=gemma3" else LONG_TEXT
    plain, big = _readable(browser, server, f"?view={view}&layer=1&text={urllib.parse.quote(text)}", model)
    _check_readable(f"long text, {view}, {model}", plain, big, maps=True)
    if view == "Overview":  # and a short text's overview, which no visit reached either
        plain, big = _readable(browser, server, "?view=Overview", model)
        _check_readable("Overview", plain, big, maps=True)
