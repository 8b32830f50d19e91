"""Where the classes live and how the database is opened: `ATTNVIZ_DB` read, checked and turned into a SQLAlchemy
engine, and a database's failures put in a line a person may see.

- a file path (default `attnviz/classes.db` under the user's data folder: $XDG_DATA_HOME or ~/.local/share): SQLite,
  one file on one machine, in WAL mode so that readers (every heartbeat) never wait for a writer, with a busy
  timeout so that 30 answers in the same second queue instead of failing; every write is one `BEGIN IMMEDIATE`
  transaction;
- a `postgresql://user:password@host:port/database` URL: PostgreSQL (psycopg 3), which several servers (replicas)
  share; connections are pooled and checked before use (a restarted database is reconnected).

Any other value (another scheme, a URL without a database) is `BadDatabase` at once, with what to write instead.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

DB_ENV = "ATTNVIZ_DB"
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
FILE_CHECK_SECONDS = 1.0  # SQLite: how often a pooled connection checks that its file is still the one it opened


class BadDatabase(ValueError):
    """ATTNVIZ_DB (or --db) is neither a file path nor a postgresql:// URL the store can use."""


DATABASE_ERRORS = (OSError, sa.exc.SQLAlchemyError, BadDatabase)  # what opening or using the store can raise
PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def masked(text: str) -> str:
    """Text with the password of any URL in it hidden (postgresql://user:***@host/db)."""
    return PASSWORD.sub(r"\1***@", text)


def error_line(err: BaseException) -> str:
    """A database failure in one line a person may see: its first line (SQLAlchemy appends the statement and its
    parameters on the next ones), any URL's password hidden, at most 200 characters."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return masked(first)[:200]


def default_path() -> Path:
    """The SQLite file when ATTNVIZ_DB is a path: $ATTNVIZ_DB, else attnviz/classes.db under $XDG_DATA_HOME
    (default ~/.local/share)."""
    if os.environ.get(DB_ENV):
        return Path(os.environ[DB_ENV])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "attnviz" / "classes.db"


def configured() -> str:
    """What the store opens when it is given nothing: $ATTNVIZ_DB as written, else the default file."""
    return os.environ.get(DB_ENV) or str(default_path())


def database_url(target: Path | str) -> sa.URL:
    """The SQLAlchemy URL of a store target: a `postgresql://` URL (driven by psycopg 3), or a file path (SQLite).

    BadDatabase, saying what would work, for anything else: another scheme (mysql://, sqlite://, http://), a
    PostgreSQL URL the parser refuses or that names no database, a value that looks like a scheme without its `//`
    ("postgresql:host/db", which would otherwise become a folder named "postgresql:" holding a SQLite file).
    """
    raw = str(target).strip()
    example = "a file path (SQLite) or postgresql://user:password@host:5432/database"
    if raw.lower().startswith(POSTGRES_SCHEMES):
        try:
            url = sa.make_url(raw)
        except (sa.exc.ArgumentError, ValueError) as err:
            raise BadDatabase(f"{DB_ENV} is not a URL PostgreSQL can take ({err}); write {example}.") from None
        if not url.database:
            raise BadDatabase(f"{DB_ENV} names no database: write {example}.")
        return url.set(drivername="postgresql+psycopg")
    if not raw:
        raise BadDatabase(f"{DB_ENV} is empty: write {example}.")
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):", raw)
    if "://" in raw or (scheme and scheme.group(1).lower().startswith(("postgres", "sqlite", "mysql", "http"))):
        raise BadDatabase(f"{masked(raw)[:60]!r} is not a database attnviz can use: write {example}.")
    path = Path(raw).expanduser()
    if path.is_dir():
        raise BadDatabase(f"{masked(raw)[:60]!r} is a folder: name a file in it (for example {path / 'classes.db'}).")
    return sa.URL.create("sqlite", database=str(path.resolve()))


def sqlite_engine(url: sa.URL) -> sa.Engine:
    """SQLite: WAL, a 30 s busy timeout, and `BEGIN IMMEDIATE` for writes (reads run without a transaction).

    Connections are pooled (opening one costs about 0.3 ms, and a class of 100 asks several times a second). A
    pooled connection is handed out only while its file, and its WAL, are the ones it opened (checked at most once
    a second): a database replaced, restored or damaged under a running server (its WAL deleted) is opened afresh,
    so a call a second later sees it."""
    path = Path(url.database or "")  # database_url() gives every SQLite URL its file
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(
        url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=8, max_overflow=56, pool_timeout=60
    )

    wal = path.with_name(path.name + "-wal")

    def identity() -> tuple:
        return _inode(path), _inode(wal)

    @event.listens_for(engine, "connect")
    def _connect(dbapi, record) -> None:
        dbapi.isolation_level = None  # the driver begins nothing by itself; writes begin below
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
            dbapi.execute(f"PRAGMA {pragma}")  # NORMAL in WAL: a crash may lose the last commit, never corrupt
        record.info["file"], record.info["checked"] = identity(), time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(_dbapi, record, _proxy) -> None:
        if time.monotonic() - record.info["checked"] < FILE_CHECK_SECONDS:
            return
        if record.info.get("file") != identity():
            raise sa.exc.DisconnectionError("the database file changed under this connection")  # the pool reconnects
        record.info["checked"] = time.monotonic()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        if conn.get_execution_options().get("attnviz_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def postgres_engine(url: sa.URL) -> sa.Engine:
    """PostgreSQL: a pool checked before use, a 10 s connect timeout, the class's name in pg_stat_activity, and text
    in UTF-8 whatever the database's encoding (in a SQL_ASCII database, made by an initdb with no UTF-8 locale,
    psycopg would hand back bytes: SQLAlchemy's first query failed on them)."""
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        pool_size=8,
        max_overflow=32,
        pool_timeout=60,
        connect_args={"connect_timeout": 10, "application_name": "attnviz", "client_encoding": "utf8"},
    )
