"""The words widgets write from numbers: which layers a sliding window masks."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest


def _note(windows: list[int], n_tokens: int) -> list[str]:
    def page(windows: list[int], n_tokens: int) -> None:
        from attnviz.ui import widgets

        widgets.windows_note(windows, n_tokens)

    at = AppTest.from_function(page, kwargs={"windows": windows, "n_tokens": n_tokens}).run()
    assert not at.exception
    return [c.value for c in at.caption]


@pytest.mark.parametrize(
    ("windows", "n", "said"),
    [
        ([0, 0, 0], 900, []),  # no window
        ([512, 512, 0], 400, []),  # a text within the window: nothing is masked
        (
            [512, 0, 0],
            900,
            [
                "Layer 1 uses a sliding window of 512 tokens: grey down the left of its map is keys "
                "further back, which the window masks; layers 2–3 see every earlier key."
            ],
        ),
        (
            [4096, 4096, 4096, 0, 512],
            5000,
            [
                "Layers 1–3, 5 use sliding windows of 512 or 4,096 tokens: grey down the "
                "left of their maps is keys further back, which the window masks; layer "
                "4 sees every earlier key."
            ],
        ),
    ],
)
def test_the_overview_names_the_layers_a_window_masks(windows, n, said):
    assert _note(windows, n) == said
