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
