"""attnviz: see, head by head, where a transformer's attention goes.

The public API is the door (attnviz.api), re-exported here and loaded on first use, so that `import attnviz` costs
nothing until a function is called:

    import attnviz
    results = attnviz.attention("The animal didn't cross the street because it was too tired.")
    attnviz.show(results)                        # every head of a layer, one head large, the layer x head overview
    attnviz.show(outputs.attentions, tokens)     # attention you already have (Hugging Face, a tensor, an array)
    run = attnviz.corpus("texts.jsonl", model="default")  # what every head does across a corpus (Parquet tables)
"""

import sys
import types
import warnings
from typing import TYPE_CHECKING

from attnviz.version import __version__

# In a notebook without ipywidgets, tqdm.auto (imported by huggingface_hub as transformers loads) warns "IProgress not
# found" in the first cell that loads a model: noise in a cell where attnviz draws no progress bar.
warnings.filterwarnings("ignore", message="IProgress not found")

if TYPE_CHECKING:  # what a type checker sees of the door (at run time the names load on first use: __getattr__)
    from attnviz.api import (
        ModelLoadError,
        View,
        ablate,
        attention,
        corpus,
        corpus_runs,
        engine,
        generate,
        importance,
        induction,
        open_corpus_run,
        patch,
        qk_space,
        show,
    )

__all__ = [  # a literal list: type checkers and linters read the door's names from it
    "__version__",
    "attention",
    "show",
    "induction",
    "importance",
    "ablate",
    "patch",
    "generate",
    "engine",
    "corpus",
    "open_corpus_run",
    "corpus_runs",
    "qk_space",
    "View",
    "ModelLoadError",
]
DOOR = tuple(__all__[1:])


def __getattr__(name: str):
    """The door's names, imported from attnviz.api when first asked for."""
    if name in DOOR:
        from attnviz import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnviz' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What `dir(attnviz)` lists: the door's names and the version."""
    return sorted(__all__)


class _Door(types.ModuleType):
    """The package's module: a door's name stays the door's function. Importing the subpackage attnviz.corpus makes
    Python set the package's attribute `corpus` to that module, which hid the function `attnviz.corpus` after the
    first call of any door function (the README's own sequence failed: "'module' object is not callable"). The
    subpackage is still imported and reachable (sys.modules, `from attnviz.corpus import run`)."""

    def __setattr__(self, name: str, value) -> None:
        if name in DOOR and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Door
