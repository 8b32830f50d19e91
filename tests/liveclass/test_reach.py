"""Where students reach the server: loopback or not, this machine's address on its network, the address a class's
links carry. No traffic: a UDP connect only asks the routing table (the server's tests are in e2e/test_serving.py)."""

import json
import socket

import pytest

from attnviz.cli import main
from attnviz.liveclass import reach


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST", True),
        ("app.localhost", True),
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", True),
        ("", True),
        ("192.168.1.20", False),
        ("10.0.0.7", False),
        ("fe80::1", False),
        ("school-server.local", False),
        ("attnviz.example.org", False),
    ],
)
def test_loopback_hosts_are_this_machine_only(host, loopback):
    assert reach.is_loopback(host) is loopback


def test_the_network_address_found_is_one_of_this_machines_own():
    found = reach.lan_address()
    if found is None:
        pytest.skip("this machine has no network address but loopback")
    assert not reach.is_loopback(found)
    with socket.socket() as s:
        s.bind((found, 0))  # only an address of this machine's own interfaces can be bound


def test_the_links_carry_the_operators_address_then_the_teachers_then_the_one_found():
    found = "http://192.0.2.9:8501"
    assert reach.student_base("localhost:8501", "http://room.example:80/", found) == "http://room.example:80"
    assert reach.student_base("192.168.1.20:8501", None, found) == "http://192.168.1.20:8501"  # the teacher's own
    assert reach.student_base("attnviz.school.lan", None, found) == "http://attnviz.school.lan"
    assert reach.student_base("127.0.0.1:8501", None, found) == found  # opened on the server itself
    assert reach.student_base("[::1]:8501", None, found) == found
    assert reach.student_base("localhost:8501", None, None) == "http://localhost:8501"  # the panel warns
    assert reach.student_base(None) == "http://localhost:8501"
    assert reach.checked_url("https://attnviz.school.org/") == "https://attnviz.school.org"
    with pytest.raises(ValueError, match="must start with http"):
        reach.checked_url("room:8501")


def test_a_loopback_server_has_no_room_address_and_a_room_server_offers_its_network_one():
    url, warning = reach.room_url("127.0.0.1", 8502)
    assert url is None and "attnviz serve --lan" in warning and "http://localhost:8502" in warning
    url, _ = reach.room_url("192.168.7.9", 8503)  # listening on one named interface: that address
    assert url == "http://192.168.7.9:8503"
    found = reach.lan_address()
    url, warning = reach.room_url("0.0.0.0", 8504)
    if found:
        assert url == f"http://{found}:8504"
        assert (warning is None) is not reach.in_container()  # in a container, the address may be the container's
    else:
        assert url is None and "No network address" in warning
    assert reach.serves_room("0.0.0.0") and reach.serves_room("::") and reach.serves_room("10.1.2.3")
    assert not reach.serves_room("127.0.0.1") and not reach.serves_room("localhost")


def test_class_create_takes_the_operators_address_and_warns_on_a_loopback_one(tmp_path, monkeypatch, capsys):
    out = tmp_path / "class.json"
    monkeypatch.setenv(reach.BASE_URL_ENV, "http://192.0.2.40:8501")
    assert main(["class", "create", "--db", str(tmp_path / "c.db"), "--json", str(out)]) == 0
    made = json.loads(out.read_text())
    assert made["student_url"] == f"http://192.0.2.40:8501/?class={made['code']}"
    assert "warning" not in capsys.readouterr().err
    monkeypatch.delenv(reach.BASE_URL_ENV)
    assert main(["class", "create", "--db", str(tmp_path / "c.db"), "--json", str(out)]) == 0
    made = json.loads(out.read_text())
    assert made["student_url"].startswith("http://localhost:8501/?class=")
    err = capsys.readouterr().err
    assert "students' devices cannot reach it" in err and "--base-url" in err


def test_serve_refuses_a_public_url_that_is_not_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNVIZ_DB", str(tmp_path / "c.db"))
    assert main(["serve", "--no-preload", "--port", "1", "--public-url", "room:8501"]) == 2
    err = capsys.readouterr().err
    assert "must start with http" in err and "Traceback" not in err
