"""A long text's maps: a click on the zoomable map names its block, the exact window keeps its weights."""

import numpy as np
import pytest
from plotly_data import array


def test_a_click_on_the_zoomable_map_names_the_block_under_it():
    from attnviz.figures import lazy_maps

    n, f = 10, 4  # blocks 1-4, 5-8, 9-10
    assert lazy_maps.block_centres(n, f).tolist() == [2.5, 6.5, 9.5]
    fig = lazy_maps.zoomable_map(np.arange(9, dtype=np.float32).reshape(3, 3), f, n, "<b>t</b>")
    markers = fig.data[1]
    assert len(markers.x) == 9 and array(markers.x).tolist()[:3] == [2.5, 6.5, 9.5]  # one clickable marker a cell
    assert array(markers.y).tolist()[:4] == [2.5, 2.5, 2.5, 6.5]  # row by row: point k is block divmod(k, 3)
    event = {"selection": {"points": [{"curve_number": 1, "point_index": 5}]}}
    assert lazy_maps.clicked_cell(event, 3) == (1, 2)
    assert lazy_maps.clicked_cell({"selection": {"points": [{"curve_number": 0, "point_index": 5}]}}, 3) is None
    assert lazy_maps.clicked_cell({"selection": {"points": [{"curve_number": 1, "point_index": 9}]}}, 3) is None
    assert lazy_maps.clicked_cell(None, 3) is None
    assert "<b>" not in fig.layout.title.text


def test_the_exact_window_keeps_its_weights_masks_and_the_share_outside_and_escapes_tokens():
    from attnviz.figures import lazy_maps

    w = np.array([[0.5, 0.0], [0.2, 0.3]], dtype=np.float32)
    masked = np.array([[False, True], [False, False]])
    fig = lazy_maps.window_map(
        w, ["<script>x</script>", "it"], ["a", "b"], 1030, 7, np.array([0.5, 0.5]), "t", masked=masked
    )
    z = array(fig.data[0].z)
    assert np.isnan(z[0, 1]) and z[1].tolist() == pytest.approx([0.2, 0.3])  # masked cells are gaps, not zeros
    grey = array(fig.data[2].z)  # ... drawn grey by a trace of their own, on the map's own cells
    assert np.array_equal(grey == 1, masked) and list(fig.data[2].x) == list(fig.data[0].x)
    assert array(fig.data[1].z).ravel().tolist() == [0.5, 0.5]  # what each row gives to keys outside the window
    assert [c for _, c in fig.data[1].colorscale] == ["white", "black"]  # more ink, more weight outside
    assert list(fig.data[0].y) == ["&lt;script&gt;x&lt;/script&gt; ·1031", "it ·1032"]  # positions 1-based
    assert list(fig.data[0].x) == ["a ·8", "b ·9"]


def test_the_zoomable_map_draws_what_the_mask_forbids_grey_the_future_and_beyond_a_sliding_window():
    from attnviz.figures import interactive, lazy_maps
    from attnviz.figures.style import MASKED_COLOUR

    n, f, window = 40, 4, 12  # 10 blocks; a query sees itself and the 11 keys before it
    m = np.ones((10, 10), dtype=np.float32)
    z = array(lazy_maps.zoomable_map(m, f, n, "t", window=window).data[0].z)
    assert np.array_equal(np.isnan(z), interactive.masked_cells(n, n, f, f, window))
    assert np.isnan(z[0, 1]) and np.isnan(z[9, 5]) and not np.isnan(z[9, 6])  # 0-based: query 36 sees keys 25-36
    fig = lazy_maps.zoomable_map(m, f, n, "t", window=window)
    assert fig.data[1].name == "zoom"  # the click markers stay trace 1 (clicked_cell)
    grey = array(fig.data[2].z)  # the masked cells grey, a trace of their own: the plot's white beside the square map
    assert np.array_equal(grey == 1, np.isnan(z)) and fig.data[2].colorscale[0][1] == MASKED_COLOUR
    assert fig.layout.plot_bgcolor == "white"
    bidirectional = lazy_maps.zoomable_map(m, f, n, "t", causal=False)
    assert not np.isnan(array(bidirectional.data[0].z)).any() and len(bidirectional.data) == 2
