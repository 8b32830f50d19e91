"""Rules of the house: engines, analysis and figures never import Streamlit; pages hold no tensors."""

import ast
import subprocess
import sys

from conftest import ROOT

PURE = ["attnviz/result.py", "attnviz/tokens.py", "attnviz/engines", "attnviz/analysis", "attnviz/figures"]


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def _files(entry):
    p = ROOT / entry
    return [p] if p.is_file() else sorted(p.rglob("*.py"))


def test_pure_layers_never_import_streamlit_in_source():
    offenders = [str(f) for e in PURE for f in _files(e) if any(m.split(".")[0] == "streamlit" for m in _imports(f))]
    assert offenders == []


def test_importing_the_pure_layers_does_not_load_streamlit():
    modules = "attnviz.engines.registry, attnviz.engines.bert, attnviz.analysis.views, attnviz.analysis.cost, "
    modules += "attnviz.figures.interactive, attnviz.figures.export, attnviz.__main__"
    code = f"import sys, {modules}; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_pages_do_not_import_torch():
    for f in (ROOT / "app_pages").glob("*.py"):
        assert "torch" not in {m.split(".")[0] for m in _imports(f)}, f
