"""Publication-quality exports: seaborn/matplotlib PNG and SVG, CSV of a matrix, a JSON bundle.

Figures are built on matplotlib's object API (no pyplot global state), so many sessions can
export at once. Builders return figures or bytes and never show anything.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from attnviz.engines.registry import titled
from attnviz.figures.interactive import layer_masked
from attnviz.figures.style import MASKED_COLOUR, LogScale, Style, weight_text
from attnviz.result import AttentionResult
from attnviz.version import __version__

DEFAULT_CMAP = Style().cmap


@dataclass(frozen=True)
class Manifest:
    """What produced an export: model, backend, device, text, which map, and the view options."""

    model: str
    backend: str
    device: str
    text: str
    kind: str
    layer: int  # 1-based, as people read it
    head: int | None  # 1-based; None for a whole layer
    options: dict = field(default_factory=dict)
    attnviz_version: str = __version__


def _plain_label(token: str) -> str:
    """A token as a matplotlib tick label (dollar signs escaped)."""
    return token.replace("$", r"\$")  # matplotlib would read $...$ as mathtext


def _label(ax, rows, cols) -> None:
    """Every token as a tick label at its cell's centre: columns upright (rotated 90°), rows level, 7 pt.

    Set here rather than given to seaborn: for labels it is given, seaborn measures every one to see whether they
    overlap, each measure building a renderer of the whole figure (a layer grid's PNG spent 7 of its 11 s of CPU on
    it, 2026-11-29), and then turns them as the overlap says; these are always turned so."""
    ax.set_xticks(np.arange(len(cols)) + 0.5, [_plain_label(t) for t in cols], rotation=90, fontsize=7)
    ax.set_yticks(np.arange(len(rows)) + 0.5, [_plain_label(t) for t in rows], rotation=0, fontsize=7, va="center")


def _draw(ax, matrix, rows, cols, cmap: str, vmax: float, labels: bool, cbar: bool, cbar_ax=None, masked=None) -> None:
    ax.set_facecolor(MASKED_COLOUR)  # masked cells (seaborn leaves them out): grey
    sns.heatmap(
        matrix,
        ax=ax,
        mask=masked,
        cmap=cmap,
        vmin=0.0,
        vmax=vmax,
        square=matrix.shape[0] == matrix.shape[1],
        cbar=cbar,
        cbar_ax=cbar_ax,
        cbar_kws={"label": "attention weight"} if cbar else None,
        xticklabels=False,
        yticklabels=False,
    )
    if labels:
        _label(ax, rows, cols)


def head_figure(result: AttentionResult, layer: int, head: int, *, cmap: str = DEFAULT_CMAP) -> Figure:
    """One head with token labels (0-based layer and head)."""
    m = result.weights[layer, head].numpy()
    side = min(16.0, max(4.5, 0.28 * max(m.shape) + 2))
    fig = Figure(figsize=(side + 1.2, side), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    labels = max(m.shape) <= 120
    _draw(
        ax,
        m,
        result.target_tokens,
        result.source_tokens,
        cmap,
        float(m.max()),
        labels,
        True,
        masked=layer_masked(result, layer),
    )
    ax.set_title(_plain_label(f"{titled(result.model)} — layer {layer + 1}, head {head + 1} ({result.kind} attention)"))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    return fig


def grid_figure(result: AttentionResult, layer: int, *, cmap: str = DEFAULT_CMAP, columns: int = 4) -> Figure:
    """Every head of a layer in a grid, one shared colour scale, token labels on the outer axes."""
    w = result.weights[layer].numpy()  # (H, Tq, Tk)
    n = w.shape[0]
    rows = math.ceil(n / columns)
    cell = min(4.0, max(2.6, 0.12 * w.shape[-1] + 1.2))
    fig = Figure(figsize=(columns * cell + 1.0, rows * cell + 0.8), dpi=150, layout="constrained")
    gs = fig.add_gridspec(rows, columns + 1, width_ratios=[1] * columns + [0.05])
    cbar_ax = fig.add_subplot(gs[:, -1])
    vmax = float(w.max())
    labels = w.shape[-1] <= 40
    for h in range(n):
        ax = fig.add_subplot(gs[h // columns, h % columns])
        _draw(
            ax,
            w[h],
            result.target_tokens,
            result.source_tokens,
            cmap,
            vmax,
            labels,
            h == 0,
            cbar_ax,
            masked=layer_masked(result, layer),
        )
        ax.set_title(f"Head {h + 1}", fontsize=9)
        if labels and h % columns:
            ax.set_yticklabels([])
        if labels and h // columns < rows - 1 and h + columns < n:
            ax.set_xticklabels([])
    heads = "its one head" if n == 1 else f"all {n} heads"
    fig.suptitle(_plain_label(f"{titled(result.model)} — layer {layer + 1}, {heads} ({result.kind} attention)"))
    return fig


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """PNG or SVG bytes of a figure."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"export format must be png or svg, not {fmt!r}")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, bbox_inches="tight")
    return buf.getvalue()


def matrix_csv(matrix: np.ndarray, rows, cols, row_start: int = 0, col_start: int = 0) -> str:
    """One map as CSV: a header of key tokens, one line per query token (positions keep equal tokens apart).

    row_start and col_start (0-based) place a window of a longer text: its labels carry the text's positions.
    """
    index = [f"{row_start + i + 1}:{t}" for i, t in enumerate(rows)]
    columns = [f"{col_start + j + 1}:{t}" for j, t in enumerate(cols)]
    return pd.DataFrame(np.asarray(matrix), index=pd.Index(index, name="query"), columns=columns).to_csv(
        float_format="%.8g"
    )


MASKED_NOTE = (
    "masked: true where the model's mask forbids the cell (a causal future, or further back than a sliding window);"
    " its weight is 0 and the app draws it grey"
)


def _finite(values: np.ndarray) -> list:
    """A matrix as JSON lists: NaN (no value) as null, never as the invalid NaN literal."""
    v = np.asarray(values, dtype=float)
    return np.where(np.isnan(v), np.full(v.shape, None), v).tolist() if np.isnan(v).any() else v.tolist()


def bundle_json(
    weights: np.ndarray,
    rows,
    cols,
    manifest: Manifest,
    pieces: tuple | None = None,
    masked: np.ndarray | None = None,
) -> str:
    """The weights shown, their token labels, the tokenizer's raw pieces (`pieces`: rows', cols') where the
    labels are tokens, what produced them, and (`masked`: bool, the last two axes of `weights`, or each layer's for
    an overview) the cells the model's mask forbids."""
    raw = {} if pieces is None else {"target_pieces": list(pieces[0]), "source_pieces": list(pieces[1])}
    forbidden = {} if masked is None else {"masked": np.asarray(masked, dtype=bool).tolist(), "note": MASKED_NOTE}
    return json.dumps(
        {
            "manifest": asdict(manifest),
            "target_tokens": list(rows),
            "source_tokens": list(cols),
            **raw,
            "shape": list(np.shape(weights)),
            "weights": _finite(weights),
            **forbidden,
        },
        ensure_ascii=False,
    )


def layer_csv(weights: np.ndarray, rows, cols, masked: np.ndarray | None = None) -> str:
    """Every head of a layer as long-form CSV: head, query, key (1-based positions), weight; with `masked` ((Tq, Tk)
    bool: interactive.layer_masked), a last column saying which 0s are the model's mask (the future, beyond a sliding
    window), drawn grey, not weights it computed."""
    h, tq, tk = weights.shape
    hh, qq, kk = np.meshgrid(np.arange(h), np.arange(tq), np.arange(tk), indexing="ij")
    frame = pd.DataFrame(
        {
            "head": hh.ravel() + 1,
            "query_pos": qq.ravel() + 1,
            "query": np.asarray(rows, dtype=object)[qq.ravel()],
            "key_pos": kk.ravel() + 1,
            "key": np.asarray(cols, dtype=object)[kk.ravel()],
            "weight": weights.ravel(),
        }
    )
    if masked is not None:
        frame["masked"] = np.asarray(masked, dtype=bool)[qq.ravel(), kk.ravel()]
    return frame.to_csv(index=False, float_format="%.8g")


def overview_figure(
    thumbs: np.ndarray, title: str, *, cmap: str = DEFAULT_CMAP, masked: np.ndarray | None = None, log: bool = False
) -> Figure:
    """All layers x heads as small maps (thumbs: (L, H, s, s')), one shared colour scale (`log`: the app's log scale,
    style.LogScale); `masked` ((s, s') or each layer's (L, s, s')): the cells the mask forbids, grey as the app draws
    them."""
    n_l, n_h = thumbs.shape[:2]
    if masked is not None:
        thumbs = np.where(np.broadcast_to(masked, (n_l, *thumbs.shape[2:]))[:, None], np.nan, thumbs)
    fig = Figure(figsize=(1.1 * n_h + 1.2, 1.1 * n_l + 0.8), dpi=150, layout="constrained")
    axes = fig.subplots(n_l, n_h, squeeze=False)
    vmax = float(np.nanmax(thumbs))
    scale = LogScale.of(thumbs) if log else None
    colours = {"norm": LogNorm(scale.low, scale.high, clip=True)} if scale else {"vmin": 0.0, "vmax": vmax}
    image = None
    for layer in range(n_l):
        for head in range(n_h):
            ax = axes[layer, head]
            ax.set_facecolor(MASKED_COLOUR)  # NaN (masked) cells are left out: grey
            shown = np.maximum(thumbs[layer, head], scale.low) if scale else thumbs[layer, head]  # NaN stays NaN
            image = ax.imshow(shown, cmap=cmap, **colours)
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"H{head + 1}", fontsize=8)
            if head == 0:
                ax.set_ylabel(f"L{layer + 1}", fontsize=8)
    if image is not None:  # a result has at least one layer and one head
        bar = fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight" + (" (log scale)" if scale else ""))
        if scale:
            bar.set_ticks(scale.ticks(), labels=[weight_text(v) for v in scale.ticks()])
    fig.suptitle(_plain_label(title))
    return fig


def thumbs_csv(thumbs: np.ndarray) -> str:
    """The overview's small maps as long-form CSV: layer, head, row, column (1-based), value."""
    n_l, n_h, s, s2 = thumbs.shape
    ll, hh, rr, cc = np.meshgrid(np.arange(n_l), np.arange(n_h), np.arange(s), np.arange(s2), indexing="ij")
    frame = pd.DataFrame(
        {
            "layer": ll.ravel() + 1,
            "head": hh.ravel() + 1,
            "row": rr.ravel() + 1,
            "column": cc.ravel() + 1,
            "weight": thumbs.ravel(),
        }
    )
    return frame.to_csv(index=False, float_format="%.8g")


def panels_figure(panels, title: str, *, cmap: str = DEFAULT_CMAP, log: bool = False) -> Figure:
    """Maps side by side (panel_maps.Panel objects): one shared scale (`log`: the app's log scale, style.LogScale),
    masked cells left blank (grey)."""
    plain = [p for p in panels if not p.signed]
    vmax = max(
        float(np.max(np.where(p.masked, 0, p.matrix)) if p.masked is not None else np.max(p.matrix)) for p in plain
    )
    shown = [np.where(p.masked, np.nan, p.matrix) if p.masked is not None else p.matrix for p in plain]
    scale = LogScale.of(np.concatenate([m.ravel() for m in shown])) if log else None
    fig = Figure(figsize=(5.2 * len(panels), 5.2), dpi=150, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, p in zip(axes, panels, strict=True):
        ax.set_facecolor(MASKED_COLOUR)
        labels = max(p.matrix.shape) <= 60
        on_log = scale if not p.signed else None
        colours = {"norm": LogNorm(on_log.low, on_log.high, clip=True)} if on_log else {}
        sns.heatmap(
            np.maximum(p.matrix, on_log.low) if on_log else p.matrix,
            ax=ax,
            mask=p.masked,
            cmap="RdBu" if p.signed else cmap,
            vmin=None if on_log else -np.abs(p.matrix).max() if p.signed else 0.0,
            vmax=None if on_log else np.abs(p.matrix).max() if p.signed else vmax,
            center=0.0 if p.signed else None,
            **colours,
            square=False,
            cbar=p.signed or p is plain[-1],
            xticklabels=False,
            yticklabels=False,
        )
        if labels:
            _label(ax, p.rows, p.cols)
        ax.set_title(_plain_label(p.title), fontsize=9)
    fig.suptitle(_plain_label(title))
    return fig


def panels_json(panels, manifest: Manifest, extra: dict | None = None) -> str:
    """Every panel's matrix (its weights; a masked cell's is 0), its tokens, which cells its mask forbids, and what
    produced them; `extra`'s keys (JSON values: a generation's prompt and text) beside them."""
    out = []
    for p in panels:
        forbidden = {} if p.masked is None else {"masked": np.asarray(p.masked, dtype=bool).tolist()}
        out.append(
            {
                "title": p.title.replace("\n", " "),
                "target_tokens": list(p.rows),
                "source_tokens": list(p.cols),
                "weights": _finite(p.matrix),
                **forbidden,
            }
        )
    note = {"note": MASKED_NOTE} if any(p.masked is not None for p in panels) else {}
    return json.dumps({"manifest": asdict(manifest), **(extra or {}), "panels": out, **note}, ensure_ascii=False)
