"""The frame: both entries (the repository's app.py, the packaged streamlit_app.py) offer the same pages, and the
server's settings are passed as flags that agree with the repository's config file."""

import json
import sys
import tomllib

import pytest
from apptest import _ok
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from attnviz import cli
from attnviz.ui import frame

PACKAGED = str(ROOT / "attnviz/streamlit_app.py")


def test_no_folder_named_pages_is_beside_either_entry():
    """Streamlit takes a pages/ folder beside the main script for its legacy multipage mode (a page's URL on a fresh
    server then runs without the frame)."""
    for entry in (ROOT / "app.py", ROOT / PACKAGED):
        assert not (entry.parent / "pages").exists(), entry


def test_every_page_has_its_file_its_module_and_its_url():
    stems = [stem for stem, _, _ in frame.PAGES]
    assert sorted(stems) == sorted(p.stem for p in (ROOT / "app_pages").glob("*.py"))
    assert all((ROOT / f"attnviz/ui/pages/{s}.py").exists() for s in stems)


def test_each_page_file_only_calls_its_modules_render():
    """The two entries cannot drift: `make run`, the container and `attnviz serve` run the packaged entry over each page
    module's render(); `streamlit run app.py` (and the AppTests) run app_pages/, whose files do nothing else."""
    import ast

    for f in sorted((ROOT / "app_pages").glob("*.py")):
        body = [
            n
            for n in ast.parse(f.read_text()).body
            if not isinstance(n, ast.Expr) or not isinstance(n.value, ast.Constant)
        ]
        assert [ast.unparse(n) for n in body] == [f"from attnviz.ui.pages import {f.stem}", f"{f.stem}.render()"], f


def test_the_settings_passed_as_flags_agree_with_the_repositorys_config_file():
    config = tomllib.loads((ROOT / ".streamlit/config.toml").read_text())
    for key, value in frame.SETTINGS.items():
        section, name = key.split(".")
        if key == "server.fileWatcherType":  # the file leaves it to the test's flags; serve never watches
            continue
        assert str(config[section][name]).lower() == value, key


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_the_packaged_app_draws_the_heads_page_as_app_py_does():
    at = AppTest.from_file(PACKAGED, default_timeout=120).run()
    _ok(at)
    packaged = [json.loads(c.proto.spec)["data"][0]["z"] for c in at.get("plotly_chart")]
    repo = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    _ok(repo)
    assert packaged and packaged == [json.loads(c.proto.spec)["data"][0]["z"] for c in repo.get("plotly_chart")]


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_serve_runs_the_packaged_app_with_its_settings_and_never_watches_files(monkeypatch, tmp_path):
    seen = {}

    def fake_streamlit_main():
        seen["argv"] = list(sys.argv)
        return 0

    monkeypatch.setattr("streamlit.web.cli.main", fake_streamlit_main)
    monkeypatch.setenv("ATTNVIZ_DB", str(tmp_path / "c.db"))
    monkeypatch.chdir(tmp_path)  # any folder: nothing is read from it or written into it
    assert cli.main(["serve", "--no-preload", "--port", "8765"]) == 0
    argv = seen["argv"]
    assert argv[:3] == ["streamlit", "run", PACKAGED]
    assert "--server.fileWatcherType=none" in argv and "--server.port" in argv and "8765" in argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]


def test_no_page_stops_the_whole_run_so_the_frame_always_finishes_it():
    """st.stop() would end the run before the frame publishes the class's view, writes a follower's ?drawn= and
    draws its heartbeat; pages end early with ui/halt.py's halt(), which the frame catches."""
    import re
    from pathlib import Path

    ui = Path(__file__).resolve().parents[2] / "attnviz" / "ui"
    stopping = [str(p.relative_to(ui)) for p in ui.rglob("*.py") if re.search(r"\bst\.stop\(\)", p.read_text())]
    assert stopping == ["halt.py"]  # where a fragment's own rerun still stops itself


@pytest.mark.slow  # three pages drawn: about 4 s
def test_coming_back_to_a_page_finds_it_where_it_was_left_with_the_text_every_page_shares():
    """Heads on one head (layer 4, head 2); the Model overview, whose rollout slider names a layer of its own and no
    head; the Class page; back to Heads: layer 4, head 2 again (it showed view=Layer&layer=6). A text typed
    meanwhile is the one every page shares; a cell that opens a head still opens that head."""
    from apptest import APP

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"view": "Head", "layer": "4", "head": "2"})
    at.run()
    _ok(at)
    at.switch_page("app_pages/overview.py").run()
    at.slider(key="ov.layer").set_value(6).run()
    _ok(at)
    assert at.query_params["layer"] == "6" and "head" not in at.query_params
    trophy = "The trophy doesn't fit into the suitcase because it is too big."
    at.sidebar.text_input(key="sb.text").set_value(trophy).run()
    at.switch_page("app_pages/classroom.py").run()
    _ok(at)
    at.switch_page("app_pages/heads.py").run()
    _ok(at)
    assert (at.slider(key="heads.layer").value, at.query_params["view"], at.query_params["head"]) == (4, "Head", "2")
    assert at.query_params["text"] == trophy
    at.switch_page("app_pages/overview.py").run()  # and the overview where it was left: its rollout at layer 6
    _ok(at)
    assert at.slider(key="ov.layer").value == 6


@pytest.mark.slow  # three runs of the Heads page: about 3 s
def test_a_phones_text_box_in_the_main_area_is_the_sidebars_text(monkeypatch):
    """On a phone the sidebar starts folded, and with it the Text box. The main area holds the box again (CSS shows
    it at a phone's width alone): it holds the sidebar's text, a text typed there is the sidebar's and the URL's, and
    while a long text is in use (not the short text) it is not drawn. A computer's page has none."""
    from apptest import APP

    from attnviz.ui import controls

    at = AppTest.from_file(APP, default_timeout=120).run()
    _ok(at)
    assert not [t for t in at.main.text_input if t.key == "phone.text"]  # no browser says it is a phone
    monkeypatch.setattr(controls, "on_phone", lambda: True)
    at.run()
    _ok(at)
    phone, side = at.main.text_input(key="phone.text"), at.sidebar.text_input(key="sb.text")
    assert phone.value == side.value
    trophy = "The trophy doesn't fit into the suitcase because it is too big."
    phone.set_value(trophy).run()
    _ok(at)
    assert at.sidebar.text_input(key="sb.text").value == trophy and at.query_params["text"] == trophy
    assert "trophy" in "".join(at.get("plotly_chart")[0].proto.spec)  # the page drew the new text
    at.sidebar.text_input(key="sb.text").set_value("A cat sat.").run()
    assert at.main.text_input(key="phone.text").value == "A cat sat."
    at.sidebar.text_area(key="sb.long").set_value("A long passage. " * 40).run()
    _ok(at)
    assert not [t for t in at.main.text_input if t.key == "phone.text"]


def test_the_phones_text_box_after_the_session_lost_its_keys_neither_fails_nor_puts_its_old_text_back():
    """A following student's page that takes the teacher's view clears the session's keys (seat._take); the browser
    then sends the box's old value with the next run, and its callback found no key: the run failed and the page
    stayed blank (bench/class_browser.py: a follower that never showed the teacher's view). Nor may that old value
    replace the teacher's text. A text typed into the box as the last run drew it is the sidebar's."""
    import streamlit as st

    from attnviz.ui import controls

    teacher = "The trophy doesn't fit into the suitcase because it is too big."
    st.session_state.clear()
    st.session_state["sb.text"] = teacher
    controls._from_phone()  # the box's key gone with the rest: nothing, no KeyError
    st.session_state["phone.text"] = "A student's old text."  # what the browser still held; no seed: not typed
    controls._from_phone()
    assert st.session_state["sb.text"] == teacher
    st.session_state["phone.seed"] = teacher  # drawn with the teacher's text, then typed over
    st.session_state["phone.text"] = "A cat sat."
    controls._from_phone()
    assert st.session_state["sb.text"] == "A cat sat."
    st.session_state.clear()
