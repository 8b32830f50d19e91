"""Maps side by side: masked cells drawn masked, a difference on its own scale, rows of panels that leave every
key its label, titles over their panels."""

import numpy as np
import pytest
import torch

from attnviz.figures import interactive, layout, panel_maps
from attnviz.tokens import display_labels


def test_side_by_side_draws_the_mask_as_masked_not_as_zero():
    t = 4
    causal = torch.tril(torch.ones(t, t))
    causal = (causal / causal.sum(-1, keepdim=True)).numpy()
    toks = tuple("abcd")
    masked = np.triu(np.ones((t, t), dtype=bool), 1)
    panels = [
        panel_maps.Panel("self", np.full((t, t), 0.25), toks, toks),
        panel_maps.Panel("causal", causal, toks, toks, masked=masked),
        panel_maps.Panel("cross", np.full((2, t), 0.25), ("x", "y"), toks),
    ]
    fig = panel_maps.side_by_side(panels)
    z = np.asarray(fig.data[1].z, dtype=float)
    assert np.isnan(z[masked]).all() and not np.isnan(z[~masked]).any()
    assert {d.coloraxis for d in fig.data[:3]} == {"coloraxis"}  # one colour scale
    assert fig.layout.coloraxis.cmax == 1.0
    grey = fig.data[3]  # the masked cells, grey, over the causal panel only: the ground white round every panel
    assert len(fig.data) == 4 and grey.name == "masked" and (grey.xaxis, grey.yaxis) == (fig.data[1].xaxis, "y2")
    assert np.array_equal(np.asarray(grey.z, dtype=float) == 1, masked) and fig.layout.plot_bgcolor == "white"


def test_side_by_side_stands_on_white_where_no_panel_masks_anything():
    toks = tuple("abc")
    fig = panel_maps.side_by_side([panel_maps.Panel("self", np.full((3, 3), 1 / 3), toks, toks)] * 2)
    assert fig.layout.plot_bgcolor == "white" and len(fig.data) == 2  # a grey ground: a frame saying "masked"


def test_side_by_side_puts_a_difference_on_its_own_diverging_scale():
    toks = ("a", "b")
    fig = panel_maps.side_by_side(
        [
            panel_maps.Panel("p", np.eye(2), toks, toks),
            panel_maps.Panel("d", np.array([[0.5, -0.5], [0, 0]]), toks, toks, signed=True),
        ]
    )
    assert fig.data[1].coloraxis == "coloraxis2" and fig.layout.coloraxis2.cmid == 0.0


def test_side_by_side_panels_keep_their_row_labels_in_their_own_space():
    src, tgt = tuple("saturday 22"), ("<s>", "2", "0", "2", "6")
    panels = [
        panel_maps.Panel("self", np.full((11, 11), 1 / 11), src, src),
        panel_maps.Panel("masked", np.full((5, 5), 0.2), tgt, tgt),
        panel_maps.Panel("cross", np.full((5, 11), 1 / 11), tgt, src),
    ]
    fig = panel_maps.side_by_side(panels)
    x1, x2, x3 = (fig.layout[f"xaxis{s}"].domain for s in ("", "2", "3"))
    y1, y2, y3 = (fig.layout[f"yaxis{s}"].showticklabels for s in ("", "2", "3"))
    assert y1 and y2 and not y3  # the cross panel shares the masked panel's rows, so it shares its labels
    label_width = panel_maps._label_fraction(display_labels(tgt), 12)  # measured as drawn: "<s> ·1", not "&lt;s&gt;"
    assert display_labels(tgt)[0] == "&lt;s&gt; ·1" and layout.drawn_chars(display_labels(tgt)) == len("<s> ·1")
    assert x2[0] - x1[1] >= label_width + panel_maps.PANEL_GAP - 1e-9  # room for panel 2's own labels
    assert abs((x3[0] - x2[1]) - panel_maps.PANEL_GAP) < 1e-9  # no room needed before panel 3
    assert all(0 <= a < b <= 1 for a, b in (x1, x2, x3))


def test_side_by_side_panels_stand_in_rows_that_leave_every_key_its_label_and_two_scales_one_over_the_other():
    """Three panels of the default sentence's 16 tokens with a difference on its own scale (the Compare page): at
    1280x800 as many a row as give each key a label's line; on a projector one under another, each row's panel
    clear of the next one's title and key labels; the two colour bars stacked, not side by side."""
    toks = tuple(f"tok{i}" for i in range(16))
    w = np.full((16, 16), 1 / 16)
    panels = [
        panel_maps.Panel("bidirectional", w, toks, toks),
        panel_maps.Panel("causal", w, toks, toks),
        panel_maps.Panel("difference", w - w.T, toks, toks, signed=True),
    ]
    for style, per_row in ((interactive.Style(), 2), (interactive.Style(projector=True), 1)):
        assert panel_maps.panels_a_row(panels, style) == per_row
        fig = panel_maps.side_by_side(panels, style=style)
        ys = [fig.layout[f"yaxis{s}"].domain for s in ("", "2", "3")]
        rows = sorted({tuple(y) for y in ys}, reverse=True)
        assert len(rows) == -(-3 // per_row)
        assert all(
            lower[1] < upper[0] for upper, lower in zip(rows, rows[1:], strict=False)
        )  # a gap for labels and a title
        assert [fig.layout[f"yaxis{s}"].title.text for s in ("", "2", "3")][::per_row] == ["query"] * len(rows)
        xs = [fig.layout[f"xaxis{s}"].domain for s in ("", "2", "3")]
        assert len({round(x1 - x0, 6) for x0, x1 in xs}) == 1  # a short last row keeps the others' width
        titles = [a.y for a in fig.layout.annotations]
        assert titles == pytest.approx([y[1] for y in ys])  # each panel's title sits on its own row's top
        bars = fig.layout.coloraxis.colorbar, fig.layout.coloraxis2.colorbar
        assert bars[0].y - bars[0].len >= bars[1].y + bars[1].len - 1e-9  # the weight bar over the difference's
    phone = panel_maps.side_by_side(panels, style=interactive.Style(phone=True))  # both bars across its top
    bars = phone.layout.coloraxis.colorbar, phone.layout.coloraxis2.colorbar
    assert [b.orientation for b in bars] == ["h", "h"] and bars[0].y > bars[1].y  # weight, then the difference
    assert (bars[0].y - bars[1].y) * phone.layout.height >= layout.BAR_ACROSS_PX - 1e-6  # apart, not overlapping
    assert phone.layout.margin.t >= 2 * layout.BAR_ACROSS_PX
    keys = tuple(f"k{i}" for i in range(40))  # one panel of 40 keys on a projector: no layout gives each its line
    alone = panel_maps.side_by_side(
        [panel_maps.Panel("steps", np.full((3, 40), 1 / 40), ("a", "b", "c"), keys)],
        style=interactive.Style(projector=True),
    )
    step = int(alone.layout.xaxis.title.text.split()[2][:-2])
    assert step > 1 and alone.layout.xaxis.title.text == f"key: every {step}{layout.ordinal(step)} of 40 labelled"
    assert list(alone.layout.xaxis.tickvals) == [f"k{i} ·{i + 1}" for i in range(0, 40, step)]
    wide = [panel_maps.Panel("many", np.full((80, 80), 1 / 80), tuple(map(str, range(80))), tuple(map(str, range(80))))]
    assert panel_maps.panels_a_row(wide * 3, interactive.Style(projector=True)) == 3  # unlabelled: one row


def test_a_phones_panels_are_laid_out_for_its_column():
    """The date model's three maps of a short date ("5/6/21": 7 source tokens, 11 written): three a row on a laptop,
    one a row on a phone's 358 px column, where three a row put the written tokens' labels on the map to their left
    (the readability visit's phone check), and each title wrapped for the phone's width. Its one colour bar lies
    across the top, and the rows' labels take their room as drawn ("</s> ·7", not "&lt;/s&gt; ·7"): measured escaped,
    with the bar down the side, the date model's maps had 126 of the column's 358 px."""
    src, tgt = tuple("5/6/21") + ("</s>",), ("<s>", *"2020-06-05")
    panels = [
        panel_maps.Panel("encoder self-attention\nlayer 2, head 1", np.full((7, 7), 1 / 7), src, src),
        panel_maps.Panel("decoder masked self-attention\nlayer 2, head 1", np.full((11, 11), 1 / 11), tgt, tgt),
        panel_maps.Panel("cross-attention (decoder → encoder)\nlayer 2, head 1", np.full((11, 7), 1 / 7), tgt, src),
    ]
    assert panel_maps.panels_a_row(panels, interactive.Style()) == 3
    phone = interactive.Style(phone=True)
    assert panel_maps.panels_a_row(panels, phone) == 1
    fig = panel_maps.side_by_side(panels, style=phone)
    assert len({tuple(fig.layout[f"yaxis{s}"].domain) for s in ("", "2", "3")}) == 3  # three rows
    assert fig.layout.coloraxis.colorbar.orientation == "h" and fig.layout.margin.t > layout.BAR_ACROSS_PX
    plot_px = layout.PHONE_WIDTH - fig.layout.margin.l - 10
    assert plot_px >= 0.7 * layout.PHONE_WIDTH, plot_px  # the maps, not their labels and bar, take the column
    for a in fig.layout.annotations:  # each title's longest line fits over its map
        longest = max(len(line) for line in a.text.split("<br>"))
        assert panel_maps.CHAR_EM * (phone.font_size + 1) * longest <= plot_px, a.text


def test_panel_titles_stay_over_their_panels_and_out_of_the_figure_title():
    toks = ("a", "b")
    fig = panel_maps.side_by_side([panel_maps.Panel("first\nline two", np.eye(2), toks, toks)], title="<b>whole</b>")
    assert fig.layout.title.text == "&lt;b&gt;whole&lt;/b&gt;"  # the figure's own title, escaped
    assert [a.text for a in fig.layout.annotations] == ["first<br>line two"]


def test_numbered_rows_take_the_room_of_the_labels_they_show_not_of_a_position_they_do_not():
    """Generate's steps ("step 3: Paris") are drawn as they are, no " ·N": they were measured with one, four
    characters of room a panel did not use."""
    from attnviz.figures.layout import row_label_px

    rows = tuple(f"step {i + 1}: word{i}" for i in range(12))
    p = panel_maps.Panel(
        "steps", np.full((12, 12), 1 / 12), rows, tuple(f"k{j}" for j in range(12)), numbered_rows=True
    )
    fig = panel_maps.side_by_side([p])
    assert list(fig.data[0].y) == list(rows) == panel_maps.row_labels(p)
    assert fig.layout.margin.l == round(row_label_px(rows, 12) + 12 + 10)  # "step 12: word11", not "… ·12"
    plain = panel_maps.Panel("t", np.full((2, 2), 0.5), ("<a>", "b"), ("c", "d"))
    assert panel_maps.row_labels(plain) == ["&lt;a&gt; ·1", "b ·2"]


def test_a_writings_steps_and_a_panel_mark_what_a_sliding_window_hides_beside_the_future():
    """Row s of a writing is the query at prompt - 1 + s: it sees the keys up to it, and within a layer's window only
    the nearest; the rest is masked (grey), not weight 0. A whole panel of a windowed result likewise."""
    from attnviz.result import AttentionResult

    prompt, n, tk, window = 4, 3, 6, 3  # queries at positions 3, 4, 5
    p = panel_maps.steps_panel(np.full((n, tk), 0.5), ("a", "b", "c"), tuple("uvwxyz"), prompt, "t", window)
    seen = [[k for k in range(tk) if not p.masked[s, k]] for s in range(n)]
    assert seen == [[1, 2, 3], [2, 3, 4], [3, 4, 5]]
    assert (
        panel_maps.steps_panel(np.full((n, tk), 0.5), ("a", "b", "c"), tuple("uvwxyz"), prompt, "t").masked[0].tolist()
        == [False] * 4 + [True] * 2
    )
    i, j = np.indices((5, 5))
    w = torch.tensor(((j <= i) & (i - j < 2)) / np.minimum(np.arange(5) + 1, 2)[:, None], dtype=torch.float32)
    axis = tuple("abcde")
    r = AttentionResult(w[None, None], axis, axis, "causal", "m", windows=(2,))
    assert np.array_equal(panel_maps.panel(r, 0, 0, "t").masked, (j > i) | (i - j >= 2))
