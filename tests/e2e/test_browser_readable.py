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
