"""Try every page as a hostile student would, through Streamlit's AppTest (in this process, no browser): choose each
option of every select box, radio, slider of choices, segmented control and toggle, and every slider and number box
at its ends and middle; press each button twice, then the page's other buttons; open the page with each URL parameter
set to odd values (empty, negative, huge, NaN, markup, 5,000 characters). A run that raises or shows the frame's
"Something went wrong" (or any st.error) is printed; the exit status is the number of them (0: none).

Usage: HF_HUB_OFFLINE=1 .venv/bin/python scripts/hostile.py choices|buttons|urls PAGE[,PAGE...] [MODEL] [QUERY]
(PAGE: a file of app_pages/ without .py; MODEL: a name of the sidebar's menu, e.g. smollm2, gemma3, or "" for the
default; QUERY: more URL parameters every run starts from, "class=CODE&teacher=SECRET" for a class's teacher). It
takes minutes: each run is a whole page (about 0.4 s for BERT's, more for a decoder's).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
CHOOSERS = ("selectbox", "radio", "select_slider", "button_group", "toggle", "checkbox", "slider", "number_input")
SKIPPED = ("sb.", "decoder.")  # the sidebar's model menu and the decoder message's buttons load other models
ODD = ("", "-1", "0", "99999999", "nan", "1e308", "<b>x</b>", "true", "[1]", "é" * 5000)


def params() -> list[str]:
    """Every URL parameter a page reads: each state.bound(url=...) in attnviz/ui and the ones every page shares."""
    import re

    found = set()
    for f in (ROOT / "attnviz" / "ui").rglob("*.py"):
        found |= set(re.findall(r'url="([a-z_0-9]+)"', f.read_text()))
    return sorted(found) + ["model", "backend", "text", "palette", "projector"]


START: dict[str, str] = {}  # the QUERY argument's parameters, in every run


def page(name: str, model: str | None, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    if model:
        at.query_params["model"] = model
    for k, v in {**START, **(query or {})}.items():
        at.query_params[k] = v
    return at.switch_page(f"app_pages/{name}.py").run()


def failures(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.exception] + [str(e.value) for e in at.error]


def choose(widget, label: str) -> None:
    """Send an option's label as a browser does (its string value), whatever raw values the page keeps."""
    state = WidgetState()
    state.id = widget.id
    if type(widget).__name__ in ("SelectSlider", "ButtonGroup"):
        state.string_array_value.data[:] = [label]
    else:
        state.string_value = label
    widget.__class__ = type("Chosen", (type(widget),), {"_widget_state": property(lambda self: state)})


def found(at: AppTest, kind: str, key: str):
    return next((w for w in at.get(kind) if w.key == key and not getattr(w, "disabled", False)), None)


def _options(kind: str, widget) -> list:
    """What a person can set a widget to: every option, both states, or a number's ends and middle (a slider of two
    ends, a range, its ends moved together)."""
    if kind in ("toggle", "checkbox"):
        return [True, False]
    if kind in ("slider", "number_input"):
        low, high = widget.min, widget.max
        if low is None or high is None or isinstance(widget.value, (list, tuple)):
            return []
        middle = (low + high) / 2
        middle = type(low)(middle) if isinstance(low, int) else middle
        return list(dict.fromkeys([low, middle, high]))
    return list(getattr(widget, "options", []))


def choices(name: str, model: str | None, report) -> int:
    """Each option of each chooser, one at a time from a fresh page."""
    first = page(name, model)
    todo = [(kind, w.key) for kind in CHOOSERS for w in first.get(kind) if w.key and not w.key.startswith(SKIPPED)]
    runs = 0
    for kind, key in todo:
        at = page(name, model)
        widget = found(at, kind, key)
        options = _options(kind, widget)
        for option in options:
            widget = found(at, kind, key)
            if widget is None:
                break
            if kind in ("toggle", "checkbox", "slider", "number_input"):
                widget.set_value(option)
            else:
                choose(widget, option)
            at.run()
            runs += 1
            report(at, f"{key} = {option!r}")
    return runs


def buttons(name: str, model: str | None, report) -> int:
    """Each button twice from a fresh page, then up to six of the page's other buttons as it then stands."""
    first = page(name, model)
    keys = [b.key for b in first.button if b.key and not b.key.startswith(SKIPPED)]
    runs = 0
    for key in keys:
        at = page(name, model)
        for time_ in (1, 2):
            button = found(at, "button", key)
            if button is None:
                break
            button.click().run()
            runs += 1
            report(at, f"{key} pressed ({time_})")
        for other in [b.key for b in at.button if b.key and b.key != key and not b.key.startswith(SKIPPED)][:6]:
            button = found(at, "button", other)
            if button is not None:
                button.click().run()
                runs += 1
                report(at, f"{key}, then {other}")
    return runs


def urls(name: str, model: str | None, report) -> int:
    """The page opened with each URL parameter set to each odd value (the model kept where it is the one set)."""
    runs = 0
    for p in params():
        for value in ODD:
            at = page(name, None if p == "model" else model, {p: value})
            runs += 1
            report(at, f"?{p}={value[:20]!r}")
    return runs


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("choices", "buttons", "urls"):
        print(__doc__)
        return 2
    how = {"choices": choices, "buttons": buttons, "urls": urls}[argv[0]]
    model = argv[2] if len(argv) > 2 and argv[2] else None
    if len(argv) > 3:
        from urllib.parse import parse_qsl

        START.update(parse_qsl(argv[3]))
    bad = 0
    for name in argv[1].split(","):
        t0 = time.perf_counter()
        failed: list[str] = []

        def report(at: AppTest, what: str, failed: list[str] = failed, name: str = name) -> None:
            for failure in failures(at)[:1]:
                failed.append(f"{name}: {what}: {failure[:300]}")
                print(failed[-1], flush=True)

        runs = how(name, model, report)
        bad += len(failed)
        print(f"-- {name}: {runs} runs, {len(failed)} failed, {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"{bad} failed in all")
    return bad


if __name__ == "__main__":
    sys.exit(min(main(sys.argv[1:]), 125))
