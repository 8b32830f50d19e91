"""The notebook view: the app's own figures as one HTML block, and attention a user already has.

A view is the same builders the Heads page and the Model overview draw with (figures.interactive): the layer x head
grid coloured by a statistic (or, for cross-attention, every head as a small map), every head of one layer on one
colour scale, one head large. Nothing is fetched (no CDN, no require.js, no network probe): plotly.js is inlined from
the installed plotly package, once per kernel, in the first view a notebook shows (a view written to a file always
carries it); each later view carries its figures' data and waits for that copy. plotly.js is wrapped so that a page
with require.js (the classic Notebook) does not take it as an AMD module. Under each figure lies a still picture of
it (figures.static, a PNG inline), hidden once the figure draws: a notebook opened untrusted, or shown where scripts
do not run (GitHub), shows the pictures instead of blank areas. Maps are pooled past a stated size, as in the app:
SIDES below; the view says its size in bytes before a user embeds it (`View.size`, and its first line).
"""

from __future__ import annotations

import base64
import functools
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape as escape_html
from pathlib import Path
from typing import cast

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import torch

from attnviz.analysis import head_stats
from attnviz.figures import export, interactive, layout, lazy_maps, stat_charts, static
from attnviz.figures.snapshot import plotly_js
from attnviz.figures.style import Style
from attnviz.result import Attention, AttentionKind, AttentionResult, counted, whole
from attnviz.tokens import TokenAxis, named_special, shown

# Draws the view's figures once plotly.js is on the page (a notebook's later views wait for the first one's copy),
# each over its still, which is then hidden; a click on a map of the layer's grid draws that head in the one-head map
# below it, with the grid's data (its maps pool past SIDES["layer"] tokens a side: the title says so when they do)
# and the one-head map's own layout. Where scripts do not run (untrusted, GitHub), the stills are what shows.
DRAW_JS = """<script type='text/javascript'>(function () {
  var figs = {figs}, id = '{ident}', click = {click}, config = {config}, tries = 0;
  function wire(grid, head) {
    grid.on('plotly_click', function (event) {
      var t = event.points[0].fullData, layout = head.layout;  // fullData: its z decoded, rows of numbers
      var title = (grid.layout.title.text || '').split(':')[0] + ', ' + t.name
        + (/pooled/.test(grid.layout.title.text || '') ? ' (pooled as in the grid above)' : '');
      var trace = {type: 'heatmap', z: t.z, x: t.x, y: t.y, coloraxis: 'coloraxis', name: t.name,
                   hovertemplate: t.hovertemplate};
      var top = 0;
      for (var i = 0; i < t.z.length; i++) for (var j = 0; j < t.z[i].length; j++) top = Math.max(top, t.z[i][j] || 0);
      var colours = Object.assign({}, layout.coloraxis, {cmin: 0, cmax: top});  // this head's own scale, as drawn
      Plotly.react(head, [trace], Object.assign({}, layout, {coloraxis: colours,
                                                              title: Object.assign({}, layout.title, {text: title})}));
    });
  }
  function draw() {
    if (!window.Plotly) { if (++tries < 1200) setTimeout(draw, 50); return; }  // up to a minute
    Promise.all(figs.map(function (f, i) {
      var div = document.getElementById(id + '-' + i);
      return div && Plotly.newPlot(div, f.data, f.layout, config).then(function () {
        var still = document.getElementById(id + '-' + i + '-still');
        if (still) still.style.display = 'none';
      });
    })).then(function () {
      if (click) wire(document.getElementById(id + '-1'), document.getElementById(id + '-2'));
    });
  }
  draw();
})();</script>"""
_PLOTLY_SENT = False  # whether this kernel has shown a view with plotly.js (each later one draws with that copy)
SIDES = {"overview": interactive.OVERVIEW_THUMB, "layer": 96, "head": 256}  # tokens a side past which maps pool
STATISTICS = ("prev", "first", "self", "entropy")
CONFIG = {"displaylogo": False, "responsive": True}


@dataclass
class View:
    """What attnviz.show returns: a result drawn as in the app, rendered inline by Jupyter, VS Code and Colab."""

    result: Attention  # every weight held, or a long text's queries and keys (long)
    layer: int = 0  # 0-based
    head: int = 0  # 0-based
    statistic: str = "prev"
    style: Style = field(default_factory=Style)
    long: bool = False  # a long text's attention: pooled maps from the first pass, one head pooled exactly

    def __post_init__(self) -> None:
        self.layer, self.head = whole("layer", self.layer), whole("head", self.head)
        n_l, n_h = self.result.n_layers, self.result.n_heads
        if not 0 <= self.layer < n_l or not 0 <= self.head < n_h:
            raise ValueError(
                f"layer and head are 0-based here: this attention has layers 0-{n_l - 1} and heads "
                f"0-{n_h - 1} (got layer {self.layer}, head {self.head})"
            )
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic is one of {', '.join(STATISTICS)} (got {self.statistic!r})")

    def figures(self) -> list[go.Figure]:
        """The view's figures, the app's builders: the overview, the layer's heads, the one head large."""
        r = self.result
        if r.kind == "cross":  # no per-head statistics across two texts: every head as a small map
            first = interactive.overview(cast(AttentionResult, r), style=self.style)  # a long text is never cross
        else:
            stats = head_stats.with_sink(head_stats.head_stats(r), r)  # a learned sink's share: as the app labels
            labels = head_stats.labels(stats, head_stats.uniform_entropy(r), r.kind)
            first = stat_charts.stat_grid(
                stats[self.statistic].numpy(),
                labels,
                head_stats.SHORT.get(self.statistic, self.statistic),
                style=self.style,
            )
        if self.long:  # the app's long path: the first pass's pooled maps, one head pooled from its exact weights
            return [first, *self._long_maps()]
        eager = cast(AttentionResult, r)
        return [
            first,
            interactive.head_grid(eager, self.layer, style=self.style, max_side=SIDES["layer"]),
            interactive.head_map(eager, self.layer, self.head, style=self.style, max_side=SIDES["head"]),
        ]

    def _long_maps(self) -> list[go.Figure]:
        """A long text's layer (the first pass's pooled maps) and its one head pooled from its exact weights; a causal
        model's masked cells grey (its future, and what lies beyond a layer's sliding window); both on the app's log
        colour scale (layout.log_colours: on a linear one a long text's small weights were one dark colour)."""
        r = self.result
        maps, fq, fk = r.pooled(SIDES["layer"])
        m, f = r.pooled_head(self.layer, self.head, SIDES["head"])
        title = f"Layer {self.layer + 1}, head {self.head + 1}" + (f" — pooled {f}×{f} tokens a cell" if f > 1 else "")
        causal, window = r.kind == "causal", r.layer_window(self.layer)
        rows, cols = r.target_tokens, r.source_tokens
        grid = interactive.maps_grid(
            maps[self.layer], rows, cols, fq, fk, self.layer, style=self.style, causal=causal, window=window
        )
        head = lazy_maps.zoomable_map(m, f, len(rows), title, style=self.style, causal=causal, window=window)
        return [layout.log_colours(grid), layout.log_colours(head, "mean weight" if f > 1 else "weight")]

    def _charts(self) -> str:
        """Each figure's still and the place it is drawn in, and DRAW_JS with the figures' data: drawn once plotly.js
        is on the page; a click on a head of the layer's grid draws that head in the one-head map (from the grid's
        own data, in the page: no kernel round trip, so it works in a saved notebook too)."""
        ident = f"attnviz-{uuid.uuid4().hex[:12]}"
        figures = self.figures()
        places = []
        for i, fig in enumerate(figures):
            still = base64.b64encode(static.picture(fig)).decode("ascii")
            about = escape_html(static.plain(fig.layout.title.text) or "attention", quote=True)
            places.append(
                f"<div class='attnviz-figure'><img id='{ident}-{i}-still' src='data:image/png;base64,{still}' "
                f"alt='{about} (a still picture: the interactive figure draws where the notebook runs scripts)' "
                f"style='max-width:100%;height:auto;display:block'><div id='{ident}-{i}'></div></div>"
            )
        data = "[" + ",".join(pio.to_json(fig, validate=False) for fig in figures) + "]"
        script = (
            DRAW_JS.replace("{ident}", ident)
            .replace("{click}", "false" if self.long else "true")  # the long view's head is a map of positions
            .replace("{config}", json.dumps(CONFIG))
            .replace("{figs}", data.replace("<", "\\u003c"))  # no "</script>" in a token can end the script
        )
        return "".join(places) + script

    def _caption(self, plotly: bool) -> str:
        r = self.result
        cut = f" (the text was cut to fit the model: {r.truncated:,} tokens at the end dropped)" if r.truncated else ""
        js = (
            f"{len(plotly_js().encode()) / 2**20:.1f} MB of it plotly.js, inlined: nothing is fetched"
            if plotly
            else "plotly.js came with this kernel's first view, inlined there; where that output is gone or scripts do "
            "not run, a still picture of each figure shows"
        )
        return (
            f"attnviz · {escape_html(r.model)} · {r.kind} · {counted(r.n_layers, 'layer')} × "
            f"{counted(r.n_heads, 'head')} · "
            f"{len(r.target_tokens)} × {len(r.source_tokens)} tokens"
            f"{cut}{' (a long text: maps pooled from its exact weights)' if self.long else ''}"
            f" · layer {self.layer + 1}, head {self.head + 1} · this output is {{size}} MB ({js}); maps pool past "
            f"{SIDES['layer']} tokens a side for the layer, {SIDES['head']} for one head"
        )

    def html(self, *, plotly: bool = True) -> str:
        """The view as one HTML block: plotly.js inlined (plotly=False: left out, for a notebook that has it from an
        earlier view), then each figure over a still picture of it; its first line states its size. Made once for
        what the view shows (a notebook asks for it and for the repr's size)."""
        key = (self.layer, self.head, self.statistic, self.style, plotly)
        made = self.__dict__.setdefault("_made", {})
        if key not in made:
            made[key] = self._html(plotly)
        return made[key]

    def _html(self, plotly: bool) -> str:
        js = f"<script type='text/javascript'>{plotly_js()}</script>" if plotly else ""
        page = (
            "<div class='attnviz-view' style='font-family:sans-serif'>"
            f"<p style='font-size:12px;color:#555'>{self._caption(plotly)}</p>{js}{self._charts()}</div>"
        )
        return page.replace("{size}", f"{len(page.encode()) / 2**20:.1f}", 1)

    @property
    def size(self) -> int:
        """How many bytes the HTML output embeds, plotly.js included (a notebook's first view, or a file)."""
        return len(self.html().encode())

    def __repr__(self) -> str:
        r = self.result
        return (
            f"View of {r.model} ({r.kind}, {counted(r.n_layers, 'layer')} × {counted(r.n_heads, 'head')}, "
            f"{counted(len(r.target_tokens), 'token')}): "
            f"layer {self.layer}, head {self.head} (0-based), statistic {self.statistic!r}; "
            f"{self.size / 2**20:.1f} MB of HTML with plotly.js, {len(self.html(plotly=False).encode()) / 2**20:.2f} "
            "MB without (a notebook's later views)"
        )

    def _repr_html_(self) -> str:
        """What a notebook shows: plotly.js with this kernel's first view only (Colab, which shows each output in a
        frame of its own, gets it every time)."""
        global _PLOTLY_SENT
        first = not _PLOTLY_SENT or "google.colab" in sys.modules
        _PLOTLY_SENT = True
        return self.html(plotly=first)

    def to_html(self, path: str | Path) -> Path:
        """Write the view as a self-contained HTML file that opens with no network; returns the path."""
        title = escape_html(f"attnviz: {self.result.model}")
        page = f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        out = Path(path)
        out.write_text(page + self.html() + "</body></html>", encoding="utf-8")
        return out

    def _manifest(self, head: int | None) -> export.Manifest:
        r = self.result
        return export.Manifest(r.model, "", r.device, "", r.kind, self.layer + 1, None if head is None else head + 1)

    def to_png(self, path: str | Path, *, whole_layer: bool = False) -> Path:
        """The one head (or the whole layer) as a publication PNG (seaborn, as the app's export)."""
        return self._image(path, "png", whole_layer)

    def to_svg(self, path: str | Path, *, whole_layer: bool = False) -> Path:
        """The one head (or the whole layer) as SVG."""
        return self._image(path, "svg", whole_layer)

    def _eager(self, what: str) -> AttentionResult:
        """The result with every weight, for an export that writes every weight; a clear refusal on a long text."""
        if self.long:
            n = len(self.result.target_tokens)
            raise ValueError(
                f"{what} writes every weight, and this text's attention ({n:,} tokens) is kept as queries and keys: "
                "export a window of it from the Heads page, or show a shorter text"
            )
        return cast(AttentionResult, self.result)

    def _image(self, path: str | Path, fmt: str, whole_layer: bool) -> Path:
        r = self._eager(f"to_{fmt}")
        fig = export.grid_figure(r, self.layer) if whole_layer else export.head_figure(r, self.layer, self.head)
        out = Path(path)
        out.write_bytes(export.figure_bytes(fig, fmt))
        return out

    def to_csv(self, path: str | Path, *, whole_layer: bool = False) -> Path:
        """The one head's map (or every head of the layer, long form) as CSV, tokens with their positions."""
        r = self._eager("to_csv")
        w = r.weights[self.layer].numpy()
        text = (
            export.layer_csv(w, r.target_tokens, r.source_tokens, interactive.layer_masked(r, self.layer))
            if whole_layer
            else export.matrix_csv(w[self.head], r.target_tokens, r.source_tokens)
        )
        out = Path(path)
        out.write_text(text, encoding="utf-8")
        return out

    def to_json(self, path: str | Path) -> Path:
        """The one head's weights, its tokens and what produced it, as the app's JSON bundle."""
        r = self._eager("to_json")
        text = export.bundle_json(
            r.weights[self.layer, self.head].numpy(),
            r.target_tokens,
            r.source_tokens,
            self._manifest(self.head),
            masked=interactive.layer_masked(r, self.layer),
        )
        out = Path(path)
        out.write_text(text, encoding="utf-8")
        return out


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte (the inverse of its bytes_to_unicode table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, n = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def piece_text(piece: str) -> str:
    """A tokenizer's raw piece as text to read: byte-level BPE ("Ġanimal", "Ċ") and SentencePiece ("▁animal")
    decoded, WordPiece ("##ing") and special tokens ("[CLS]") as they are."""
    table = _byte_decoder()
    text = piece.replace("▁", " ")
    if all(c in table for c in piece):  # byte-level: each character one byte; kept as it is unless it reads as UTF-8
        try:
            text = bytes(table[c] for c in piece).decode("utf-8")
        except UnicodeDecodeError:  # part of a character (or a WordPiece "é"): the piece as it is
            text = piece
    return shown(text) if text else piece


def _axis(tokens: Sequence[str] | TokenAxis, n: int, which: str) -> TokenAxis:
    if isinstance(tokens, TokenAxis):
        axis = tokens
    elif isinstance(tokens, str):  # was read as one token per character: "60 query tokens were given"
        name, one = ("tokens", "query") if which == "queries" else ("key_tokens", "key")
        raise TypeError(
            f"{name} is a list of the tokens, one per {one}, not the text: "
            "tokenizer.convert_ids_to_tokens(encoded['input_ids'][0])"
        )
    else:
        pieces = tuple(str(t) for t in tokens)
        axis = TokenAxis(
            tuple(piece_text(p) for p in pieces),
            tuple(named_special(p) for p in pieces),  # as attnviz's own run marks them: the same labels
            tuple(range(len(pieces))),
            ((0, 0),) * len(pieces),
            pieces=pieces,
        )
    if len(axis) != n:
        one = {"queries": "query", "keys": "key"}[which]
        raise ValueError(f"the attention has {n} {which}, but {len(axis)} {one} tokens were given")
    return axis


# How far from 1 a row of weights a user passes may sum: bfloat16 keeps 8 bits of each weight, so a row of weights
# rounded to it sums to 1 within 2^-8 (0.0039); float16 within 2^-11, float32 within about 1e-6. Past this, they are
# not weights after a softmax (scores, or a mask applied after it). Rows within it are divided by their sums in
# float32, so that every row sums to 1 as attnviz's own results do (a change of at most 0.4% of a weight).
INPUT_ROW_TOLERANCE = 5e-3


def _float32(a) -> torch.Tensor:
    """A tensor of any dtype (bfloat16, float16, float64) or an array as a float32 tensor on the CPU."""
    if hasattr(a, "detach"):
        return a.detach().to("cpu", torch.float32)  # NumPy has no bfloat16: the cast is torch's
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


def weights_of(attention) -> torch.Tensor:
    """(L, H, Tq, Tk) float32 on the CPU from what a user has: a Hugging Face `outputs.attentions` tuple (one
    (batch, H, Tq, Tk) tensor per layer; the first item of the batch), a tensor or a NumPy array of (L, H, Tq, Tk)
    or (H, Tq, Tk) (one layer), in any floating dtype."""
    if hasattr(attention, "to_tuple") and not hasattr(attention, "shape"):  # a transformers ModelOutput, whole
        kinds = ("attentions", "encoder_attentions", "decoder_attentions", "cross_attentions")
        held = [k for k in kinds if attention.get(k)]  # an encoder's output holds cross_attentions=() too
        raise TypeError(
            "this is the model's whole output: pass "
            + (" or ".join(f"outputs.{k}" for k in held) if held else "outputs.attentions")
            + ("" if held else " (it holds none: call the model with output_attentions=True)")
        )
    if isinstance(attention, list | tuple):
        if not attention:
            raise ValueError(
                "the attention is empty: with transformers, load the model with "
                "attn_implementation='eager' and call it with output_attentions=True"
            )
        layers = [_float32(a) for a in attention]
        if any(a.ndim != 4 for a in layers):
            raise ValueError("outputs.attentions holds one (batch, heads, queries, keys) tensor per layer")
        weights = torch.stack([a[0] for a in layers])
    else:
        weights = _float32(attention)
        if weights.ndim == 3:
            weights = weights[None]
        if weights.ndim != 4:
            raise ValueError(
                f"attention is (layers, heads, queries, keys) or (heads, queries, keys), not of shape "
                f"{tuple(weights.shape)}"
            )
    return weights.float().contiguous()


def result_of(attention, tokens=None, *, key_tokens=None, model: str = "your model") -> AttentionResult:
    """An AttentionResult from attention a user has and its tokens (query tokens; `key_tokens` where the keys are
    another text's, as in cross-attention). It checks itself: every row sums to 1, shapes match the tokens."""
    weights = weights_of(attention)
    _, _, tq, tk = weights.shape
    if tokens is None:
        tokens = [str(i + 1) for i in range(tq)]
    rows = _axis(tokens, tq, "queries")
    cols = _axis(key_tokens, tk, "keys") if key_tokens is not None else (rows if tq == tk else None)
    if cols is None:
        raise ValueError(f"the attention has {tq} queries and {tk} keys: give key_tokens for the keys' text")
    kind: AttentionKind
    if key_tokens is not None and cols.tokens != rows.tokens:
        kind = "cross"
    else:
        upper = torch.triu(torch.ones(tq, tk, dtype=torch.bool), diagonal=1)
        kind = "causal" if tq == tk and not weights[..., upper].any() else "self"
    sums, finite = weights.sum(-1, dtype=torch.float64), bool(torch.isfinite(weights).all())
    if not finite or (sums - 1).abs().max() > INPUT_ROW_TOLERANCE:
        raise ValueError(
            f"every row of attention weights sums to 1 (within {INPUT_ROW_TOLERANCE:g}), but these sum to "
            f"{float(sums.min()):.4g}..{float(sums.max()):.4g}{'' if finite else ', and some are NaN or infinite'}: "
            "pass the weights after the softmax (outputs.attentions), not the scores or a mask applied after it"
        )
    weights = (weights.double() / sums[..., None]).float()  # half precision's rounding, divided out
    return AttentionResult(weights, rows, cols, kind, model)


def as_result(value) -> tuple[Attention, bool]:
    """The attention to draw from attnviz's own values (a Results: its first kind; an Attention), and whether it
    is a long text's (held as queries and keys: the view draws it as the app's long path does)."""
    main = getattr(value, "main", value)
    return main, bool(getattr(value, "lazy", False)) or not hasattr(main, "weights")
