"""Attention rollout and attention flow (Abnar & Zuidema 2020) for self-attention results.

Both treat each layer's head-averaged attention plus the residual connection, Â = 0.5 A + 0.5 I
with rows renormalised, as the edges of a layered graph from the output tokens down to the input.
Rollout multiplies the layers' matrices; flow takes the maximum flow through the graph.
"""

from __future__ import annotations

import networkx as nx
import torch
from networkx.algorithms.flow import build_residual_network, shortest_augmenting_path
from torch import Tensor

from attnviz.result import AttentionResult

# Flow solves T x T max-flow problems on an (L+1) x T node graph: 2 s at 16 tokens on 2 CPU cores.
MAX_FLOW_TOKENS = 32


def residual_attention(result: AttentionResult) -> Tensor:
    """(L, T, T): heads averaged, 0.5 A + 0.5 I, rows renormalised."""
    if result.kind == "cross":
        raise ValueError("rollout and flow are defined for self-attention, not cross-attention")
    a = result.weights.mean(1)  # (L, T, T)
    a = 0.5 * a + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
    return a / a.sum(-1, keepdim=True)


def rollout(result: AttentionResult) -> Tensor:
    """(L, T, T): entry [l, i, j] is how much token i after layer l+1 draws from input token j."""
    a = residual_attention(result)
    out = [a[0]]
    for layer in range(1, a.shape[0]):
        out.append(a[layer] @ out[-1])  # (T, T) @ (T, T)
    return torch.stack(out)


def flow(result: AttentionResult, upto: int | None = None) -> Tensor:
    """(T, T): the maximum flow from each token after layer `upto` (0-based; default the last) to each
    input token, every row normalised to sum to 1."""
    a = residual_attention(result)
    n_layers, t = a.shape[0], a.shape[-1]
    upto = n_layers - 1 if upto is None else upto
    if t > MAX_FLOW_TOKENS:
        raise ValueError(
            f"Attention flow is limited to {MAX_FLOW_TOKENS} tokens here (this text has {t}); use rollout."
        )
    graph = nx.DiGraph()
    for layer in range(upto + 1):  # edges from layer+1 (queries) down to layer (keys)
        for i in range(t):
            for j in range(t):
                graph.add_edge((layer + 1, i), (layer, j), capacity=a[layer, i, j].item())
    # One residual network reused by every solve; of networkx's algorithms this one was fastest here
    # (all five gave the same values).
    residual = build_residual_network(graph, "capacity")
    out = torch.zeros(t, t, dtype=torch.float32)
    for i in range(t):
        for j in range(t):
            solved = shortest_augmenting_path(graph, (upto + 1, i), (0, j), residual=residual, value_only=True)
            out[i, j] = solved.graph["flow_value"]
    return out / out.sum(-1, keepdim=True)


def first_token_share(rolled: Tensor) -> float:
    """The mean, over a (T, T) rollout's rows, of each row's share on the first token: on a decoder it grows with
    every layer multiplied in (SmolLM2's last layer: about 1 for every token), as the first token is in every row's
    past and the sink of many heads."""
    return float(rolled[:, 0].mean())
