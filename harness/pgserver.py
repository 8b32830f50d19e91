"""A real PostgreSQL server for the tests and the benchmarks, started and stopped by them (never a mock).

It uses the system's PostgreSQL binaries (`initdb`, `pg_ctl` on PATH or under /usr/lib/postgresql/*/bin; `make
test` installs Debian's `postgresql` package where apt is available and they are missing). `initdb` refuses to run
as root, so under root the server runs as the `postgres` user. The cluster lives in a fresh temporary folder, listens
on 127.0.0.1 at a free port, trusts local connections and is removed when it stops.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.server import free_port


def binaries() -> tuple[Path | None, str]:
    """(the folder holding initdb and pg_ctl, '') or (None, why the server cannot run here)."""
    found = shutil.which("initdb")
    folders = [Path(found).resolve().parent] if found else []
    folders += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    folder = next((f for f in folders if (f / "initdb").exists() and (f / "pg_ctl").exists()), None)
    if folder is None:
        return None, "no PostgreSQL server binaries (initdb, pg_ctl): install Debian's postgresql package"
    if os.geteuid() == 0 and (shutil.which("runuser") is None or _uid("postgres") is None):
        return None, "running as root with no 'postgres' user to run initdb as (initdb refuses root)"
    return folder, ""


def _uid(user: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


class Server:
    """One PostgreSQL cluster: `url(db)` for a database in it, `create()` for a fresh database, `stop()`."""

    def __init__(self, fast: bool = True) -> None:
        """Start it. fast: no fsync (the tests: nothing needs to survive a power cut); False keeps PostgreSQL's
        defaults (the benchmarks)."""
        folder, why = binaries()
        if folder is None:
            raise RuntimeError(why)
        self.home = Path(tempfile.mkdtemp(prefix="attnviz-pg-"))
        os.chmod(self.home, 0o777)  # the postgres user writes its cluster here
        self.port = free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self._ctl = str(folder / "pg_ctl")
        self.data = self.home / "data"
        subprocess.run(
            [
                *self._as,
                str(folder / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-locale",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        options = f"-p {self.port} -k {self.home} -h 127.0.0.1 -c max_connections=200"
        if fast:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._options = options
        self.start()
        self._names = itertools.count()

    def start(self) -> None:
        """Start (or start again) the cluster; waits until it takes connections."""
        log = self.home / "log"
        subprocess.run(
            [*self._as, self._ctl, "-D", str(self.data), "-l", str(log), "-o", self._options, "-w", "start"],
            check=True,
            capture_output=True,
            text=True,
        )

    def url(self, database: str = "postgres") -> str:
        """The URL of a database in this cluster, as ATTNVIZ_DB takes it."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create(self) -> str:
        """A fresh, empty database: its URL."""
        import psycopg

        name = f"attnviz_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the cluster and remove its folder."""
        subprocess.run([*self._as, self._ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)
