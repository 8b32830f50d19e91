"""Where students reach the server: the address it listens on, the address its links carry, and whether that is one
a student's device can open.

A server on 127.0.0.1 (`make run`'s default) is reachable from its own machine only. `attnviz serve --lan` listens
on every interface (0.0.0.0) and finds this machine's address on the room's network: the one the operating system
would send from towards the network (a UDP socket `connect`, which sends no packet). The class's links and QR code
carry the operator's address (`--public-url`, or $ATTNVIZ_BASE_URL: a proxy or a container's host knows one the
machine does not), else the address the teacher's browser opened unless it is a loopback one, else the address
found, else the loopback one with a warning (`student_base`).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

BASE_URL_ENV = "ATTNVIZ_BASE_URL"  # the address students open, as the operator states it (--public-url sets it)
FOUND_URL_ENV = "ATTNVIZ_ROOM_URL"  # the address `serve` found on the network (set by it, for the pages to read)
EVERY_INTERFACE = "0.0.0.0"
EVERY = (EVERY_INTERFACE, "::", "")  # what a server listens on to take connections on every interface
LOOPBACK = "127.0.0.1"
# A documentation address (RFC 5737, TEST-NET-2): a UDP connect towards it only asks the routing table which
# interface would send; nothing is sent, and nothing answers.
_PROBE = ("198.51.100.1", 9)


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, with or without brackets) is this machine alone: localhost, 127.x,
    ::1, 0.0.0.0 (a URL's 0.0.0.0 is not an address a browser elsewhere can open either)."""
    host = host.strip().strip("[]").lower()
    if host in ("localhost", "") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name (school-server.local): the network's to resolve
    return ip.is_loopback or ip.is_unspecified


def serves_room(address: str) -> bool:
    """Whether a server listening on `address` can be opened from other machines (every interface, or one that is
    not loopback)."""
    return address in EVERY or not is_loopback(address)


def url_host(url: str) -> str:
    """The host a URL names ('' when it names none)."""
    return urlsplit(url).hostname or ""


def lan_address() -> str | None:
    """This machine's IPv4 address on its network (the interface a packet out would leave from), or None when it
    has none but loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(_PROBE)
            found = s.getsockname()[0]
    except OSError:  # no route at all (no network)
        return None
    return None if is_loopback(found) else found


def in_container() -> bool:
    """Whether this process runs in a container (Docker's or podman's marker file), where the address found is the
    container's own, not one a student's device can open."""
    return os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")


def checked_url(url: str) -> str:
    """An address as the operator gave it (--public-url, $ATTNVIZ_BASE_URL), without its trailing slash."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"The public URL must start with http:// or https://, not {url[:40]!r}.")
    return url.rstrip("/")


def room_url(address: str, port: int) -> tuple[str | None, str | None]:
    """(the address this machine has on the room's network, a warning or None) for a server on `address`:`port`.

    A server on loopback has none (the warning says so); one on every interface offers the address the system
    would send from; one on a named interface, that one. In a container the address found may be the container's
    own: the warning says to give the host's."""
    if not serves_room(address):
        return None, LOOPBACK_WARNING.format(url=f"http://localhost:{port}")
    found = lan_address() if address in EVERY else address
    if not found:
        return None, NO_NETWORK_WARNING
    url = f"http://{found}:{port}"
    return url, (CONTAINER_WARNING.format(url=url) if in_container() else None)


def student_base(host: str | None, given: str | None = None, found: str | None = None) -> str:
    """The address a class's links carry, in this order: the operator's (`given`), the one the teacher's browser
    opened (`host`, the Host header) unless it is loopback, the one the server found on the network (`found`), and
    last the teacher's loopback one (the teacher's panel warns)."""
    if given:
        return given.rstrip("/")
    host = host or "localhost:8501"
    if not is_loopback(urlsplit(f"http://{host}").hostname or ""):
        return f"http://{host}"
    return found.rstrip("/") if found else f"http://{host}"


LOOPBACK_WARNING = (
    "{url} opens on this machine only: students' devices cannot reach it. Serve the room with `attnviz serve --lan` "
    "(or `make run ADDRESS=0.0.0.0`), or give the address students open with --public-url."
)
NO_NETWORK_WARNING = (
    "No network address was found on this machine: the class's links carry the address the teacher's browser opens. "
    "Connect to the room's network, or give the address students open with --public-url."
)
CONTAINER_WARNING = (
    "This server runs in a container: {url} may be the container's own address, which students' devices cannot "
    "open (unless the container shares the host's network). Give the host's address with ATTNVIZ_BASE_URL, for "
    "example http://192.168.1.20:8501; a teacher who opens the host's address gets links with it anyway."
)
