"""Benchmark: what a press of PNG or SVG costs the server (the bundled BERT, the pronoun sentence).

Each export button builds its file when pressed, on the server, in the session's thread: a layer's grid of 12
heads, one head, and the side-by-side panels. Reported in CPU seconds of this process (time.process_time: the
server's own work, steadier than the wall on a shared machine), each the worst of --runs, after one warm-up (the
first figure loads matplotlib's fonts). The layer grid is also built as seaborn labels a heatmap when given the
tokens (it measures every label, each measure building a renderer of the whole figure, to decide whether to turn
them): its time, the ratio, and whether the two PNGs are the same pixels.

Usage: python bench/exports.py [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCE = "The animal didn't cross the street because it was too tired."


def cpu_seconds(build, runs: int) -> tuple[float, bytes]:
    """The worst of `runs` CPU times of build() -> bytes, and its last bytes."""
    worst, out = 0.0, b""
    for _ in range(runs):
        start = time.process_time()
        out = build()
        worst = max(worst, time.process_time() - start)
    return worst, out


def seaborn_labelled_grid(result, layer: int):
    """The layer grid as export.grid_figure drew it before 2026-11-29: the tokens given to seaborn, which measures
    them for overlap; then turned as export turns them."""
    import math

    import seaborn as sns
    from matplotlib.figure import Figure

    from attnviz.figures import export

    w = result.weights[layer].numpy()
    n, columns = w.shape[0], 4
    rows = math.ceil(n / columns)
    cell = min(4.0, max(2.6, 0.12 * w.shape[-1] + 1.2))
    fig = Figure(figsize=(columns * cell + 1.0, rows * cell + 0.8), dpi=150, layout="constrained")
    gs = fig.add_gridspec(rows, columns + 1, width_ratios=[1] * columns + [0.05])
    cbar_ax = fig.add_subplot(gs[:, -1])
    vmax = float(w.max())
    for h in range(n):
        ax = fig.add_subplot(gs[h // columns, h % columns])
        sns.heatmap(
            w[h],
            ax=ax,
            cmap=export.DEFAULT_CMAP,
            vmin=0.0,
            vmax=vmax,
            square=True,
            cbar=h == 0,
            cbar_ax=cbar_ax,
            cbar_kws={"label": "attention weight"} if h == 0 else None,
            xticklabels=[export._plain_label(t) for t in result.source_tokens],
            yticklabels=[export._plain_label(t) for t in result.target_tokens],
        )
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
        ax.tick_params(axis="y", labelrotation=0, labelsize=7)
        ax.set_title(f"Head {h + 1}", fontsize=9)
        if h % columns:
            ax.set_yticklabels([])
        if h // columns < rows - 1 and h + columns < n:
            ax.set_xticklabels([])
    title = f"{result.model} — layer {layer + 1}, all {n} heads ({result.kind} attention)"
    fig.suptitle(export._plain_label(title))
    return fig


def same_pixels(a: bytes, b: bytes) -> bool:
    from PIL import Image, ImageChops

    one, two = Image.open(io.BytesIO(a)).convert("RGB"), Image.open(io.BytesIO(b)).convert("RGB")
    return one.size == two.size and ImageChops.difference(one, two).getbbox() is None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from attnviz import api
    from attnviz.figures import export, panel_maps

    result = api.attention(SENTENCE).main
    title = f"{result.model}: layer 1, head 1"
    panels = [panel_maps.Panel("self", result.weights[0, 0].numpy(), result.target_tokens, result.source_tokens)]
    builds = {
        "layer grid, PNG": lambda: export.figure_bytes(export.grid_figure(result, 0), "png"),
        "layer grid, SVG": lambda: export.figure_bytes(export.grid_figure(result, 0), "svg"),
        "one head, PNG": lambda: export.figure_bytes(export.head_figure(result, 0, 0), "png"),
        "a panel, PNG": lambda: export.figure_bytes(export.panels_figure(panels, title), "png"),
        "layer grid, PNG, labelled by seaborn": lambda: export.figure_bytes(seaborn_labelled_grid(result, 0), "png"),
    }
    builds["layer grid, PNG"]()  # the first figure loads the fonts
    print(f"{result.model}, {len(result.target_tokens)} tokens, worst of {args.runs} (CPU seconds of this process)")
    got = {}
    for name, build in builds.items():
        got[name] = cpu_seconds(build, args.runs)
        print(f"  {name:<40} {got[name][0]:6.2f} s")
    ours, theirs = got["layer grid, PNG"], got["layer grid, PNG, labelled by seaborn"]
    same = same_pixels(ours[1], theirs[1])
    print(f"  seaborn's labelling / ours: {theirs[0] / ours[0]:.1f}x; the same pixels: {same}")


if __name__ == "__main__":
    main()
