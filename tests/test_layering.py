"""Rules of the house: engines, analysis and figures never import Streamlit; pages hold no tensors."""

import ast
import re
import subprocess
import sys

import pytest
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


@pytest.mark.slow  # a fresh Python importing torch
def test_importing_the_pure_layers_does_not_load_streamlit():
    modules = "attnviz.engines.registry, attnviz.engines.bert, attnviz.analysis.view_options, attnviz.lessons.cost, "
    modules += "attnviz.figures.interactive, attnviz.figures.export, attnviz.cli, attnviz.__main__"
    code = f"import sys, {modules}; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow  # a fresh Python importing torch
def test_the_door_and_the_command_line_compute_without_plotly_or_streamlit():
    """A GPU host with only the library and torch (the device machine has neither plotting nor Streamlit): the door,
    the command line and the request-path bench import; plotly comes with the first figure (show, View)."""
    code = (
        "import sys; sys.modules.update(plotly=None, streamlit=None, seaborn=None); "
        "import attnviz.api, attnviz.cli; sys.path.insert(0, 'bench'); import request_path; print('imported')"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "imported", out.stderr


def test_pages_do_not_import_torch():
    for f in (ROOT / "app_pages").glob("*.py"):
        assert "torch" not in {m.split(".")[0] for m in _imports(f)}, f


def _package_files():
    return sorted((ROOT / "attnviz").rglob("*.py"))


def test_ui_never_builds_a_plotly_figure_itself():
    """Figures are built in attnviz/figures; attnviz/ui only passes them to Streamlit."""
    offenders = [
        str(f.relative_to(ROOT))
        for f in sorted((ROOT / "attnviz/ui").rglob("*.py"))
        if any(m.split(".")[0] in ("plotly", "matplotlib", "seaborn") for m in _imports(f))
    ]
    assert offenders == []


def _public_defs(tree):
    """Module-level functions and classes, and the methods of public classes, whose names are public."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                        yield f"{node.name}.{item.name}", item


def test_every_public_function_and_class_has_a_docstring():
    missing = []
    for f in _package_files():
        for name, node in _public_defs(ast.parse(f.read_text())):
            doc = ast.get_docstring(node)
            if not doc or not doc.strip().splitlines()[0].strip():
                missing.append(f"{f.relative_to(ROOT)}:{node.lineno} {name}")
    assert missing == []


def test_every_engine_parameter_is_typed():
    untyped = []
    for f in _package_files():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.args + node.args.kwonlyargs + node.args.posonlyargs
                untyped += [
                    f"{f.relative_to(ROOT)}:{node.lineno} {node.name}({a.arg})"
                    for a in args
                    if a.arg.lstrip("_") in ("engine", "eng", "hf_engine", "cpu_engine") and a.annotation is None
                ]
    assert untyped == []


def test_the_package_raises_exceptions_instead_of_asserting():
    asserts = [
        f"{f.relative_to(ROOT)}:{node.lineno}"
        for f in _package_files()
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert asserts == []


def test_design_md_s_layout_names_every_module_the_one_file_map():
    layout = (ROOT / "DESIGN.md").read_text()
    layout = layout[layout.index("## Layout") : layout.index("## Rules")]
    for f in _package_files():
        if f.name != "__init__.py":
            assert f.stem in layout, f"{f.relative_to(ROOT)} is missing from DESIGN.md's layout"
    assert "## Files" not in (ROOT / "README.md").read_text()  # the file map lives in one place


# --- the floors of the house (DESIGN.md, "Floors"), measured on the package's own imports ---

CORE = ("result", "lazy", "blocks", "fused", "stats_kernel", "cpu_kernel", "tokens", "escape", "memo")


def _module_name(f):
    parts = f.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph():
    """{module: the package modules it imports}, every import in the file (those inside functions too)."""
    files = {_module_name(f): f for f in _package_files()}
    graph = {}
    for name, f in files.items():
        found = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module for a in node.names
                }
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def _floors():
    """{unit: floor} from DESIGN.md's "Floors" block: a unit is a core module or a package (or service, __main__)."""
    design = (ROOT / "DESIGN.md").read_text()
    block = design[design.index("## Floors") : design.index("## Rules")]
    floors = {}
    for number, names in re.findall(r"^floor (\d+)\s+(.+)$", block, flags=re.M):
        for unit in re.findall(r"[\w.]+", names.split("#")[0]):
            floors[unit] = int(number)
    return floors


def _unit(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "attnviz"


def test_every_module_has_a_floor_in_design_md():
    floors = _floors()
    assert sorted({_unit(m) for m in _graph()} - set(floors)) == []
    assert all(floors[c] == 0 for c in CORE)


def test_imports_only_go_down_a_floor_or_stay_in_their_package():
    floors, up = _floors(), []
    for a, targets in _graph().items():
        for b in targets:
            if _unit(a) != _unit(b) and floors[_unit(b)] >= floors[_unit(a)] and floors[_unit(a)] != 0:
                up.append(f"{a} -> {b}")
            if floors[_unit(a)] == 0 and floors[_unit(b)] != 0:  # the core imports nothing above it
                up.append(f"{a} -> {b}")
    assert up == []


def test_there_is_no_import_circle():
    graph, circles = _graph(), []

    def visit(node, path):
        for nxt in graph[node]:
            if nxt in path:
                circles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in done:
                visit(nxt, [*path, nxt])
        done.add(node)

    done: set = set()
    for start in graph:
        if start not in done:
            visit(start, [start])
    assert circles == []


def test_analysis_is_pure_functions_of_results():
    offenders = [
        f"{a} -> {b}"
        for a, bs in _graph().items()
        if _unit(a) == "analysis"
        for b in bs
        if _unit(b) not in (*CORE, "analysis")
    ]
    assert offenders == []


def test_no_module_name_is_used_twice():
    names = [f.stem for f in _package_files() if f.name != "__init__.py"]
    names += [d.name for d in (ROOT / "attnviz").rglob("*") if d.is_dir() and (d / "__init__.py").exists()]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_no_caller_outside_the_core_asks_which_attention_value_it_holds():
    offenders = []
    for f in _package_files():
        if f.stem in CORE:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if named & {"AttentionResult", "LazyAttention"}:
                    offenders.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_no_type_ignore_for_a_missing_attribute():
    assert [str(f) for f in _package_files() if "ignore[attr-defined]" in f.read_text()] == []


MEMO_CALLS = {"kept", "cached_value", "cached", "memo", "heavy_memo", "long_memo"}


def test_no_memo_key_is_built_outside_the_door():
    """The memos are reached through the door (attnviz/api.py: Prepared; attnviz/work.py: Work, which api re-exports)
    and the service itself only: a page never writes a key, so two pages asking for the same work share one entry."""
    offenders = []
    for f in _package_files():
        if f.relative_to(ROOT).as_posix() in ("attnviz/api.py", "attnviz/work.py", "attnviz/service.py"):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            named = getattr(node, "value", None)
            if isinstance(node, ast.Attribute) and node.attr in MEMO_CALLS and getattr(named, "id", "") == "service":
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno} service.{node.attr}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Work":
                offenders.append(f"{f.relative_to(ROOT)}:{node.lineno} Work(...)")
    assert offenders == []


def test_no_page_imports_the_service_or_an_engine_or_torch():
    """A page reaches the core through the door (attnviz.api) and ui/: never the service, an engine or torch."""
    offenders = []
    for f in sorted((ROOT / "attnviz/ui/pages").glob("*.py")):
        for module in _imports(f):
            if module in ("attnviz.service", "torch") or module.startswith(("attnviz.engines", "torch.")):
                offenders.append(f"{f.relative_to(ROOT)}: {module}")
        tree = ast.parse(f.read_text())
        froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "attnviz"]
        names = {a.name for n in froms for a in n.names}
        offenders += [f"{f.relative_to(ROOT)}: attnviz.{n}" for n in names & {"service", "engines"}]
    assert offenders == []


def test_ui_imports_only_the_door_the_figures_and_the_core():
    """attnviz/ui/ (the pages and their helpers) imports from the package only the door (attnviz.api), the figures,
    the core (DESIGN.md's floor 0) and ui/ itself: the analysis, the lessons, the interventions, the class's store and
    the corpus come through the door's FRONT_END_MODULES, and models, results and kept work through its requests;
    never the service, the kept work's module or an engine (issue 55: ui/cache.py took admission, engines, the
    policy, long estimates and the reading words from the service, controls.py the registry)."""
    allowed = {"api", "figures", "ui"} | {unit for unit, floor in _floors().items() if floor == 0}
    offenders = []
    for f in sorted((ROOT / "attnviz/ui").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "attnviz":
                modules = [f"attnviz.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            else:
                continue
            inside = [m for m in modules if m.split(".")[0] == "attnviz"]
            offenders += [f"{f.relative_to(ROOT)}:{node.lineno} {m}" for m in inside if _unit(m) not in allowed]
    assert offenders == []


def test_the_doors_front_end_modules_are_the_names_a_type_checker_sees():
    """api.FRONT_END_MODULES (loaded on first use) and the TYPE_CHECKING block that names them list the same modules
    under the same names, and each one imports."""
    import importlib

    from attnviz import api

    tree = ast.parse((ROOT / "attnviz/api.py").read_text())
    seen = {
        a.asname or a.name: f"{imp.module}.{a.name}"
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
        for imp in block.body
        if isinstance(imp, ast.ImportFrom) and imp.module != "attnviz.notebook.view"
        for a in imp.names
    }
    assert seen == api.FRONT_END_MODULES
    for name, module in api.FRONT_END_MODULES.items():
        assert getattr(api, name) is importlib.import_module(module)


LONG_FUNCTIONS = {  # the functions allowed past MAX_FUNCTION_LINES, each with its reason
    "stats_kernel.py:_stats_kernel": "one Triton kernel: a tile of keys is loaded once and every statistic, column "
    "sum and pooled bin is accumulated from it in registers; the pass is the point, read top to bottom",
}
MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_a_reader_can_hold():
    """A function over 80 lines is split where a reader loses the thread (issue 55 found nine), or named above."""
    long = []
    for f in _package_files():
        for node in ast.walk(ast.parse(f.read_text())):
            is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_function and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long.append(f"{f.relative_to(ROOT / 'attnviz').as_posix()}:{node.name}")
    assert sorted(long) == sorted(LONG_FUNCTIONS)


def test_no_page_imports_another_page():
    """A page is read alone: what two pages share lives in ui/ (widgets, cache), never in one of them (the Masks page
    took Inside's stepping engine, Positions the overview's link to a head)."""
    pages = {f"attnviz.ui.pages.{f.stem}" for f in (ROOT / "attnviz/ui/pages").glob("*.py")} - {
        "attnviz.ui.pages.__init__"
    }
    offenders = []
    for f in sorted((ROOT / "attnviz/ui/pages").glob("*.py")):
        tree = ast.parse(f.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module == "attnviz.ui.pages":
                offenders += [f"{f.stem}: {a.name}" for a in n.names]
            elif isinstance(n, ast.ImportFrom | ast.Import):
                names = [n.module] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names]
                offenders += [f"{f.stem}: {m}" for m in names if m in pages]
    assert offenders == []


# --- tests as a map: tests/ mirrors attnviz/ (attnviz/engines/hooks.py -> tests/engines/test_hooks.py) ---

# Modules with no test file of their name, and where they are tested instead. A new module either gets its test file
# or a line here; a line whose module has since got its test file (or gone) fails too.
TESTED_ELSEWHERE = {
    "__main__.py": "two lines that run cli.main; test_cli.py runs `python -m attnviz` as a user would",
    "ui/room/reads.py": "ui/pages/test_classroom.py (a read a window, one in flight, a forget, a run's one read)",
    "cli/attention.py": "test_cli.py (attention, --rows, stats, rollout, doctor)",
    "cli/common.py": "test_cli.py and test_bad_input.py (--file, --rows, --json, one-line errors)",
    "cli/corpus_run.py": "corpus/test_run.py and test_cli.py (the corpus command)",
    "cli/experiments.py": "test_cli.py (pronouns, induction, ablate, patch)",
    "cli/serving.py": "ui/test_frame.py (serve's flags), e2e/test_serving.py (make run), analysis/test_poll_answers.py",
    "cli/training.py": "lessons/test_head_models.py (train-heads, eval-heads), engines/test_seq2seq.py",
    "engines/decoder_steps.py": "engines/test_families.py (each family's layer against transformers' eager), "
    "engines/test_gemma3.py, engines/test_llama.py (against the rebuilt engine)",
    "engines/layers.py": "engines/test_families.py (every family's layers, norms and projections found and used)",
    "blocks.py": "test_lazy.py: every statistic streamed in blocks equals the one of the whole tensor",
    "stats_kernel.py": "test_fused.py (the kernel, compiled on CUDA or under Triton's interpreter, against BlockPass)",
    "cpu_kernel.py": "test_fused.py (the CPU's kernel, compiled here, against BlockPass and dense weights)",
    "corpus/models.py": "corpus/test_run.py (the manifest's model and revision)",
    "corpus/on_ray.py": "corpus/test_run.py (a run on Ray writes the embedded run's rows)",
    "corpus/tables.py": "corpus/test_run.py (the heads, examples and texts tables read back)",
    "engines/date_training.py": "engines/test_seq2seq.py (the date model trained and checked)",
    "engines/smollm2.py": "engines/test_llama.py (SmolLM2's loading and parity with Hugging Face)",
    "locks.py": "engines/test_bundles.py (three processes, one conversion), corpus/test_run.py (a run waits its turn)",
    "engines/steps.py": "engines/test_scratch.py (each step of the scratch engine against its forward pass)",
    "figures/corpus_charts.py": "ui/pages/test_corpora.py and e2e/test_browser_after_clicks.py (the Corpus page)",
    "figures/layout.py": "figures/test_interactive.py, test_panel_maps.py, test_stat_charts.py (labels, widths)",
    "figures/style.py": "figures/test_interactive.py (projector mode), test_export.py (palettes)",
    "interventions/runs.py": "interventions/test_ablation.py and test_patching.py (the hooked runs)",
    "lessons/cost.py": "lessons/test_kernels.py (the measured costs of heads and masks)",
    "figures/class_charts.py": "analysis/test_poll_answers.py (the class's answers beside the model's)",
    "figures/snapshot.py": "analysis/test_poll_answers.py (a view as one HTML file), notebook/test_view.py",
    "service.py": "test_api.py (the door over it), test_admission.py, test_memo.py, ui/pages/test_heads.py",
    "streamlit_app.py": "ui/test_frame.py and e2e/test_serving.py (the packaged app under attnviz serve)",
    "ui/cache.py": "every page's AppTest in ui/pages/ (the page's calls into the door)",
    "ui/room/panel.py": "ui/pages/test_classroom.py and e2e/test_browser_pages.py (the teacher's link, a toggle)",
    "ui/controls.py": "test_app.py (the sidebar, URL state, the model picker)",
    "ui/halt.py": "ui/test_frame.py (a page's early end still finishes the frame)",
    "ui/lazy_views.py": "ui/pages/test_heads.py (a long text's views)",
    "ui/progress.py": "the AppTests of the pages that draw its bar: ui/pages/test_knockout.py, test_overview.py",
    "ui/routes.py": "e2e/test_browser_views.py (Open in Heads under the packaged app)",
    "ui/room/seat.py": "ui/pages/test_classroom.py (following, heartbeats), e2e/test_protocol.py and browser_class",
    "ui/state.py": "test_app.py (URL state restored and published)",
    "version.py": "e2e/test_package.py (the built wheel's version)",
}


def _test_file(module: str):
    """tests/x/test_y.py for attnviz/x/y.py (a package's __init__.py: tests/test_x.py beside its folder)."""
    path = ROOT / "tests" / module
    if path.name == "__init__.py":
        return path.parent.parent / f"test_{path.parent.name}.py"
    return path.with_name(f"test_{path.name}")


def test_every_module_has_a_test_file_of_its_name_or_says_where_it_is_tested():
    modules = [str(f.relative_to(ROOT / "attnviz")) for f in _package_files()]
    modules = [m for m in modules if not m.endswith("__init__.py") or m == "cli/__init__.py"]
    untested = [m for m in modules if not _test_file(m).exists() and m not in TESTED_ELSEWHERE]
    assert untested == []
    stale = [m for m in TESTED_ELSEWHERE if m not in modules or _test_file(m).exists()]
    assert stale == []
