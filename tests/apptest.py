"""Shared AppTest helpers: the app with URL parameters, the figures it sent, and no error on the page."""

import html
import json

from conftest import ROOT
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "app.py")


def _app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def _charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _maps(chart):
    """A chart's maps: its heatmaps less the masked grey drawn over them (interactive.masked_trace)."""
    return [d for d in chart["data"] if d.get("type") == "heatmap" and d.get("name") != "masked"]


def _tokens(labels):
    return [html.unescape(x.rsplit(" ·", 1)[0]) for x in labels]


def _guess(at, value, prefix):
    """Guess `value` in the predict-then-reveal question whose key starts with `prefix` (widgets.predict: the pronoun
    lesson's key names the model and the case), then press Reveal."""
    radio = next(r for r in at.radio if r.key and r.key.startswith(prefix) and r.key.endswith(".guess"))
    radio.set_value(value).run()
    at.button(key=radio.key.removesuffix(".guess") + ".reveal").click().run()


def _ok(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _compare(**params):
    """Open the Compare page directly, as a shared link to it does."""
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/compare.py").run()


def _overview(**params):
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    return at.switch_page("app_pages/overview.py").run()


PAGES_ALL = [
    "start",
    "heads",
    "inside",
    "compare",
    "generate",
    "overview",
    "pronouns",
    "positions",
    "head_count",
    "masks",
    "induction",
    "knockout",
]
