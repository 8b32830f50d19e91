"""The classroom's tables, and bringing a database up to them: created where missing, and the columns newer than
an older attnviz's database added (under an advisory lock on PostgreSQL, so that replicas starting together do not
race). One set of tables and constraints for SQLite and PostgreSQL (SQLAlchemy Core); the statements that read and
write them are attnviz.liveclass.store's.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import text
from sqlalchemy.engine import Connection

SCHEMA_LOCK = 0x617474  # the advisory lock replicas take to create or migrate the tables ("att")

metadata = sa.MetaData()
Time = sa.Float(precision=53)  # time.time(): SQLite's REAL, PostgreSQL's double precision
sa.Table(
    "classes",
    metadata,
    sa.Column("code", sa.Text, primary_key=True),
    sa.Column("secret_hash", sa.Text, nullable=False),
    sa.Column("created", Time, nullable=False),
    sa.Column("expires", Time, nullable=False),
    sa.Column("view", sa.Text, nullable=False, server_default="{}"),
    sa.Column("version", sa.Integer, nullable=False, server_default="0"),
    sa.Column("changed", Time, nullable=False, server_default="0"),
    sa.Column("locked", sa.Integer, nullable=False, server_default="0"),
)
sa.Table(
    "students",
    metadata,
    sa.Column("code", sa.Text, sa.ForeignKey("classes.code"), primary_key=True),
    sa.Column("student", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False, server_default=""),
    sa.Column("following", sa.Integer, nullable=False, server_default="1"),
    sa.Column("seen", Time, nullable=False),
    sa.Column("joined", Time, nullable=False, server_default="0"),
    sa.Column("removed", sa.Integer, nullable=False, server_default="0"),
)
sa.Table(
    "polls",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("code", sa.Text, sa.ForeignKey("classes.code"), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("options", sa.Text, nullable=False),
    sa.Column("view", sa.Text, nullable=False),
    sa.Column("created", Time, nullable=False),
    sa.Column("revealed", sa.Integer, nullable=False, server_default="0"),
    sa.Index("polls_by_class", "code", "id"),
    sqlite_autoincrement=True,
)
sa.Table(
    "answers",
    metadata,
    sa.Column("poll", sa.Integer, sa.ForeignKey("polls.id"), primary_key=True),
    sa.Column("student", sa.Text, primary_key=True),
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("at", Time, nullable=False),
)
sa.Table(
    "voters",
    metadata,
    sa.Column("poll", sa.Integer, sa.ForeignKey("polls.id"), primary_key=True),
    sa.Column("student", sa.Text, primary_key=True),
)
ADDED_COLUMNS = {  # columns newer than a database may be: added on start (table -> column -> definition)
    "classes": {"locked": "INTEGER NOT NULL DEFAULT 0"},
    "students": {"joined": "DOUBLE PRECISION NOT NULL DEFAULT 0", "removed": "INTEGER NOT NULL DEFAULT 0"},
}


def create(db: Connection, postgres: bool) -> None:
    """The tables, created where missing, and columns newer than an older attnviz's database, added; in `db`'s
    write transaction."""
    if postgres:  # replicas starting together: one creates, the others wait and find the tables
        db.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
    metadata.create_all(db)
    inspector = sa.inspect(db)
    for table, columns in ADDED_COLUMNS.items():
        have = {c["name"] for c in inspector.get_columns(table)}
        for name, definition in columns.items():
            if name not in have:
                db.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {definition}"))
