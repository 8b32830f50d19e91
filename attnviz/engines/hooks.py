"""Hook points: the one place where a caller reads or replaces what happens inside attention, for one call.

Every attention layer that attnviz computes (scratch.MultiHeadAttention, and the function that Hugging Face's
decoders of hf.CAPTURE_FAMILIES call under the name "attnviz") passes its intermediate tensors through named points:

    q, k        (B, H, Tq, Dh), (B, Hkv, Tk, Dh)  what the scores are made of: after the rotary turn, where there is one
    q_unturned, k_unturned                         Q and K before the rotary turn (rotary models on the scratch engine)
    v           (B, Hkv, Tk, Dh)
    scores      (B, H, Tq, Tk)  Q K^T * scale, before the mask
    pattern     (B, H, Tq, Tk)  the softmax: the attention weights
    z           (B, H, Tq, Dh)  each head's output, weights @ V, before W_O
    lse         (B, H, Tq)      each row's log-sum-exp of its scaled scores: a fused pass only, in a layer where
                                torch's fused kernel gives it (scratch.causal_attention; a long text's analysis skips
                                its first pass with it: attnviz.fused); read only
    value_norms (B, H, Tk)      ||f_h(x_j)||: each key's value through its head's part of W_O (Kobayashi et al. 2020)
    x, out      (B, Tq, D)      the attention's input (after the layer's norm, where it has one) and its output
    resid       (B, T, D)       the residual stream entering a layer (the scratch models' blocks)

A `Hooks` is made for one request and passed down the call: nothing is set on the model, so two sessions sharing
one model never see each other's hooks (the TransformerLens idea, without registering anything on modules).
A point is keyed by its name and layer; a seq2seq decoder's own points are named "decoder.NAME" and "cross.NAME".
Reading takes the tensor (detached, in `Hooks.taken`); replacing calls fn(layer, tensor) and goes on with what it
returns, which must have the same shape.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attnviz.result import Progress

# the keyword a forward pass's Hooks travel by through transformers' layers to attnviz's attention function (hf.py)
HOOKS_KW = "attnviz_hooks"
POINTS = (
    "q",
    "k",
    "q_unturned",
    "k_unturned",
    "v",
    "scores",
    "pattern",
    "z",
    "lse",
    "value_norms",
    "x",
    "out",
    "resid",
)
Replace = Callable[[int, Tensor], Tensor]  # (layer, tensor) -> the tensor to go on with
# (layer, q, k, v, scale, window, sinks) -> the layer's output z (B, H, Tq, Dh) with its statistics kept, or None
LayerStats = Callable[[int, Tensor, Tensor, Tensor, float, int, Tensor | None], Tensor | None]


@dataclass
class Hooks:
    """What one call reads and replaces at the hook points (see the module's docstring).

    read: names to keep; layers: only in these layers (None: every layer); replace: {name: fn(layer, tensor)};
    fused: compute each layer's output with torch's fused kernel (causal self-attention): no scores or pattern are
    formed, so neither can be read or replaced (a long text: Q and K are read instead);
    progress and n_layers: told (layer + 1, n_layers) as each layer's attention finishes;
    gather (with n_layers, every layer, a batch of 1): each read point goes straight into one (n_layers, ...) tensor
    as its layers arrive, so that `stacked` is that tensor, not a copy beside the layers (a long text's Q and K: the
    copy doubled the pass's peak memory);
    stats (with fused): called with each layer's q, k, v instead of torch's fused kernel; it returns the layer's
    output having kept the layer's statistics (lazy.ForwardStats: a long text's analysis in its forward pass), or None
    (torch's kernel runs).
    """

    read: Collection[str] = ()
    layers: Collection[int] | None = None
    replace: dict[str, Replace] = field(default_factory=dict)
    fused: bool = False
    progress: Progress | None = None
    n_layers: int = 0
    gather: bool = False
    stats: LayerStats | None = None
    taken: dict[tuple[str, int], Tensor] = field(default_factory=dict)  # what the points in `read` took
    gathered: dict[str, Tensor] = field(default_factory=dict)  # gather: name -> (n_layers, ...)

    def __post_init__(self) -> None:
        unknown = {n.split(".")[-1] for n in (*self.read, *self.replace)} - set(POINTS)
        if unknown:
            raise ValueError(f"unknown hook points {sorted(unknown)}: the points are {', '.join(POINTS)}")
        if "lse" in {n.split(".")[-1] for n in self.replace}:
            raise ValueError("the point lse is read only: what torch's kernel computed; nothing uses it after")
        if self.fused and {"scores", "pattern"} & {n.split(".")[-1] for n in (*self.read, *self.replace)}:
            raise ValueError("a fused pass forms no scores or pattern: read Q and K instead")

    def _in(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    def wants(self, name: str, layer: int) -> bool:
        """Whether this call reads or replaces point `name` in `layer` (so it is worth computing)."""
        return self._in(layer) and (name in self.read or name in self.replace)

    def reads(self, name: str, layer: int) -> bool:
        """Whether this call reads `name` in `layer` (so the tensor must not be overwritten in place)."""
        return self._in(layer) and name in self.read

    def point(self, name: str, layer: int, x: Tensor) -> Tensor:
        """Pass tensor x through point `name` of `layer`: replaced if asked, taken if read; returned."""
        if not self._in(layer):
            return x
        fn = self.replace.get(name)
        if fn is not None:
            new = fn(layer, x)
            if new.shape != x.shape:
                raise ValueError(
                    f"the replacement at {name}, layer {layer} has shape {tuple(new.shape)}, not {tuple(x.shape)}"
                )
            x = new.to(x.dtype)
        if name in self.read:
            if self.gather and self.n_layers and self.layers is None and x.shape[0] == 1:
                into = self.gathered.get(name)
                if into is None:
                    into = self.gathered[name] = x.new_empty((self.n_layers, *x.shape[1:]))
                into[layer].copy_(x[0].detach())
                self.taken[(name, layer)] = into[layer : layer + 1]  # a view: no second copy
            else:
                self.taken[(name, layer)] = x.detach()
        return x

    def finished(self, layer: int) -> None:
        """Called as a layer's attention finishes: reports progress."""
        if self.progress and self.n_layers:
            self.progress(layer + 1, self.n_layers)

    def get(self, name: str, layer: int) -> Tensor:
        """What was read at `name` in `layer`; a KeyError says what was read."""
        try:
            return self.taken[(name, layer)]
        except KeyError:
            have = sorted({f"{n}@{i}" for n, i in self.taken})
            raise KeyError(f"{name} in layer {layer} was not read (read: {', '.join(have) or 'nothing'})") from None

    def stacked(self, name: str) -> Tensor:
        """(L, ...): what was read at `name`, every layer read in order, the batch of 1 dropped."""
        layers = sorted(i for n, i in self.taken if n == name)
        if not layers:
            raise KeyError(f"{name} was not read")
        if name in self.gathered and layers == list(range(self.n_layers)):
            return self.gathered[name]
        return torch.stack([self.taken[(name, i)][0] for i in layers])


def point(hooks: Hooks | None, name: str, layer: int, x: Tensor) -> Tensor:
    """x through `hooks`' point, or x itself where there are no hooks (the common case: no cost)."""
    return x if hooks is None else hooks.point(name, layer, x)


def zero_heads(heads: dict[int, Collection[int]]) -> Replace:
    """A replacement for "z" that zeroes, in each layer of `heads` ({layer: heads}, 0-based), those heads' outputs
    before W_O: heads knocked out. Other layers pass unchanged."""
    index = {layer: sorted(set(hs)) for layer, hs in heads.items()}

    def replace(layer: int, z: Tensor) -> Tensor:
        if not index.get(layer):
            return z
        out = z.clone()
        out[:, index[layer]] = 0.0  # (B, H, Tq, Dh): the chosen heads' outputs
        return out

    return replace
