"""The classroom's store: classes, the teacher's view, followers, polls and answers, in SQLite.

The one module that talks to the database. One file (`ATTNVIZ_DB`, else `attnviz/classes.db` under the user's data
folder: $XDG_DATA_HOME or ~/.local/share), in WAL mode so that readers (every follower, every second) never wait
for a writer, with a busy timeout so that 30 answers in the same second queue instead of failing. Each thread has
its own connection. Everything survives a server restart.

Only the teacher leads: every call that changes a class (its view, a poll) takes the teacher's secret, which is
stored hashed and compared in constant time (`hmac.compare_digest`); a wrong or missing secret raises
`NotTeacher` and changes nothing. A student's answer is one row per (poll, student): a second answer is refused by
the primary key, not by a read-then-write that two requests could race through.

One voice per student: a poll takes answers only from the students who were following the class when it was
asked (its voters, written when it starts), never after its reveal; the teacher can close the class to new
students and remove one (their answers to open polls go with them). The answers with names are the teacher's
(`results_csv` takes the secret); students see the counts only.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import math
import os
import secrets
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

DB_ENV = "ATTNVIZ_DB"
HOURS_ENV = "ATTNVIZ_CLASS_HOURS"
DEFAULT_HOURS = 8.0  # a class expires this long after it was started
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a projector
CODE_LENGTH = 6
POLL_KINDS = ("token", "head type", "number", "which head")
MAX_STUDENT_NAME = 40
MAX_ANSWER = 200
FOLLOWING_WITHIN = 30.0  # a student seen this recently (seconds) counts as here
NUMBER_RANGE = (0.0, 100.0)  # a number poll asks for a percentage

SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (
    code TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    view TEXT NOT NULL DEFAULT '{}',
    version INTEGER NOT NULL DEFAULT 0,
    changed REAL NOT NULL DEFAULT 0,
    locked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS students (
    code TEXT NOT NULL REFERENCES classes(code),
    student TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    following INTEGER NOT NULL DEFAULT 1,
    seen REAL NOT NULL,
    joined REAL NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, student)
);
CREATE TABLE IF NOT EXISTS polls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    code TEXT NOT NULL REFERENCES classes(code),
    kind TEXT NOT NULL,
    question TEXT NOT NULL,
    options TEXT NOT NULL,
    view TEXT NOT NULL,
    created REAL NOT NULL,
    revealed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS answers (
    poll INTEGER NOT NULL REFERENCES polls(id),
    student TEXT NOT NULL,
    answer TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (poll, student)
);
CREATE TABLE IF NOT EXISTS voters (
    poll INTEGER NOT NULL REFERENCES polls(id),
    student TEXT NOT NULL,
    PRIMARY KEY (poll, student)
);
"""
ADDED_COLUMNS = {  # columns newer than a database file may be: added on start (table -> column -> definition)
    "classes": {"locked": "INTEGER NOT NULL DEFAULT 0"},
    "students": {"joined": "REAL NOT NULL DEFAULT 0", "removed": "INTEGER NOT NULL DEFAULT 0"},
}


class NotTeacher(PermissionError):
    """A call that only the teacher may make came without the class's secret."""


class ClassNotFound(LookupError):
    """No class has this code, or it has expired."""


class NotAdmitted(PermissionError):
    """The class is closed to new students, or the teacher removed this student."""


REMOVED = "The teacher removed this page from the class."


@dataclass(frozen=True)
class ClassInfo:
    """A class as stored (without its secret)."""

    code: str
    created: float
    expires: float
    view: dict
    version: int  # how many times the teacher's view has changed
    changed: float  # when it last changed (time.time())


@dataclass(frozen=True)
class Poll:
    """A question the teacher asked, about one view."""

    id: int
    code: str
    kind: str  # one of POLL_KINDS
    question: str
    options: list[str]  # what students choose from (empty for a number)
    view: dict  # the view the question is about (model, text, layer, head, query token, ...)
    created: float
    revealed: bool


def default_path() -> Path:
    """$ATTNVIZ_DB, else attnviz/classes.db under $XDG_DATA_HOME (default ~/.local/share)."""
    if os.environ.get(DB_ENV):
        return Path(os.environ[DB_ENV])
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "attnviz" / "classes.db"


def class_hours() -> float:
    """How long a class lasts: $ATTNVIZ_CLASS_HOURS, else 8."""
    try:
        hours = float(os.environ.get(HOURS_ENV, DEFAULT_HOURS))
    except ValueError:
        return DEFAULT_HOURS
    return hours if 0 < hours <= 24 * 30 else DEFAULT_HOURS


def links(base: str, code: str, secret: str | None = None) -> dict[str, str]:
    """The student link (?class=CODE) and, given the secret, the teacher link (?class=CODE&teacher=SECRET)."""
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"The base URL must start with http:// or https://, not {base[:40]!r}.")
    base = base.rstrip("/")
    out = {"student_url": f"{base}/?class={code}"}
    if secret:
        out["teacher_url"] = f"{base}/?class={code}&teacher={secret}"
    return out


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


def clean_code(code: object) -> str:
    """A typed class code as stored: upper case, spaces and dashes dropped; '' when it cannot be one."""
    text = "".join(str(code or "").split()).replace("-", "").upper()
    return text if len(text) == CODE_LENGTH and all(c in CODE_ALPHABET for c in text) else ""


class Store:
    """The classroom database. Safe to share between threads: each thread opens its own connection."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        db = self._db().db
        db.executescript(SCHEMA)
        for table, columns in ADDED_COLUMNS.items():  # a file from an older attnviz: migrated in place
            have = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
            for name, definition in columns.items():
                if name not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")

    def _db(self) -> _Transaction:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)  # autocommit; explicit transactions
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash may lose the last commit, never corrupt
            db.execute("PRAGMA busy_timeout=30000")
            db.row_factory = sqlite3.Row
            self._local.db = db
        return _Transaction(db)

    # --- classes -------------------------------------------------------------------------------------------------

    def create_class(self, view: dict | None = None, hours: float | None = None) -> tuple[str, str, float]:
        """A new class: (code, the teacher's secret, when it expires). The secret is shown once, stored hashed."""
        hours = class_hours() if hours is None else hours
        if not 0 < hours <= 24 * 30:
            raise ValueError(f"A class lasts more than 0 and at most 720 hours, not {hours:g}.")
        secret = secrets.token_urlsafe(24)
        now = time.time()
        expires = now + 3600 * hours
        with self._db() as db:
            for _ in range(20):
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                try:
                    db.execute(
                        "INSERT INTO classes (code, secret_hash, created, expires, view, changed) VALUES (?,?,?,?,?,?)",
                        (code, _hash(secret), now, expires, json.dumps(view or {}), now),
                    )
                    return code, secret, expires
                except sqlite3.IntegrityError:  # that code is taken: draw another
                    continue
        raise RuntimeError("could not find a free class code")

    def get(self, code: str) -> ClassInfo:
        """The class, or ClassNotFound (also once it has expired)."""
        row = self._db().execute("SELECT * FROM classes WHERE code = ?", (clean_code(code),)).fetchone()
        if row is None or row["expires"] < time.time():
            raise ClassNotFound(f"No class has the code {clean_code(code) or '(none)'}, or it has ended.")
        return ClassInfo(row["code"], row["created"], row["expires"], json.loads(row["view"]), row["version"],
                         row["changed"])  # fmt: skip

    def pulse(self, code: str) -> tuple[int, int | None, bool] | None:
        """What a follower checks every beat, in one read: (view version, newest poll id, revealed); None when the
        class does not exist or has ended."""
        row = (
            self._db()
            .execute(
                "SELECT c.version, c.expires, p.id AS poll, p.revealed FROM classes c LEFT JOIN polls p ON p.id = "
                "(SELECT MAX(id) FROM polls WHERE code = c.code) WHERE c.code = ?",
                (clean_code(code),),
            )
            .fetchone()
        )
        if row is None or row["expires"] < time.time():
            return None
        return int(row["version"]), row["poll"], bool(row["revealed"])

    def is_teacher(self, code: str, secret: str | None) -> bool:
        """Whether `secret` is this class's: compared in constant time; False for no secret or no class."""
        if not secret:
            return False
        row = self._db().execute("SELECT secret_hash FROM classes WHERE code = ?", (clean_code(code),)).fetchone()
        return row is not None and hmac.compare_digest(row["secret_hash"], _hash(secret))

    def _check(self, code: str, secret: str | None) -> str:
        code = clean_code(code)
        self.get(code)
        if not self.is_teacher(code, secret):
            raise NotTeacher("Only the teacher can do that (the teacher link carries the class's secret).")
        return code

    def set_view(self, code: str, secret: str | None, view: dict) -> int:
        """The teacher's view becomes the class's; its new version number. Unchanged views keep their version."""
        code = self._check(code, secret)
        text = json.dumps(view, sort_keys=True)
        with self._db() as db:
            db.execute(
                "UPDATE classes SET view = ?, version = version + 1, changed = ? WHERE code = ? AND view != ?",
                (text, time.time(), code, text),
            )
            return db.execute("SELECT version FROM classes WHERE code = ?", (code,)).fetchone()["version"]

    # --- students ------------------------------------------------------------------------------------------------

    def join(self, code: str, student: str, name: str = "") -> None:
        """A student joins (or comes back); their name, optional, is kept as typed (escape it to show it).
        NotAdmitted for a new student of a closed class, or a student the teacher removed."""
        code = self.get(code).code
        student = student[:64]
        with self._db() as db:
            row = db.execute("SELECT removed FROM students WHERE code = ? AND student = ?", (code, student)).fetchone()
            if row is not None and row["removed"]:
                raise NotAdmitted(REMOVED)
            if row is None and db.execute("SELECT locked FROM classes WHERE code = ?", (code,)).fetchone()["locked"]:
                raise NotAdmitted("The teacher has closed this class to new students.")
            now = time.time()
            db.execute(
                "INSERT INTO students (code, student, name, seen, joined) VALUES (?,?,?,?,?) "
                "ON CONFLICT (code, student) DO UPDATE SET name = CASE WHEN excluded.name != '' THEN excluded.name "
                "ELSE students.name END, seen = excluded.seen",
                (code, student, str(name or "")[:MAX_STUDENT_NAME], now, now),
            )

    def lock(self, code: str, secret: str | None, locked: bool) -> None:
        """The teacher closes the class to new students (those already in stay), or opens it again."""
        code = self._check(code, secret)
        with self._db() as db:
            db.execute("UPDATE classes SET locked = ? WHERE code = ?", (int(locked), code))

    def locked(self, code: str) -> bool:
        """Whether the class takes no new students."""
        return bool(self._db().execute("SELECT locked FROM classes WHERE code = ?", (clean_code(code),)).fetchone()[0])

    def remove(self, code: str, secret: str | None, student: str) -> None:
        """The teacher removes a student: they cannot come back or answer, and their answers to the polls not yet
        revealed are dropped."""
        code = self._check(code, secret)
        with self._db() as db:
            db.execute("UPDATE students SET removed = 1 WHERE code = ? AND student = ?", (code, student))
            open_polls = "SELECT id FROM polls WHERE code = ? AND revealed = 0"
            db.execute(f"DELETE FROM answers WHERE student = ? AND poll IN ({open_polls})", (student, code))
            db.execute(f"DELETE FROM voters WHERE student = ? AND poll IN ({open_polls})", (student, code))

    def removed(self, code: str, student: str) -> bool:
        """Whether the teacher removed this student."""
        row = self._db().execute("SELECT removed FROM students WHERE code = ? AND student = ?",
                                 (clean_code(code), student)).fetchone()  # fmt: skip
        return row is not None and bool(row["removed"])

    def roster(self, code: str, secret: str | None) -> list[dict]:
        """The teacher's list of the students seen in the last FOLLOWING_WITHIN seconds: id, name, following."""
        code = self._check(code, secret)
        rows = self._db().execute(
            "SELECT student, name, following FROM students WHERE code = ? AND removed = 0 AND seen >= ? "
            "ORDER BY joined",
            (code, time.time() - FOLLOWING_WITHIN),
        )
        return [{"student": r["student"], "name": r["name"], "following": bool(r["following"])} for r in rows]

    def set_following(self, code: str, student: str, following: bool) -> None:
        """A student follows the teacher, or explores alone (and can rejoin)."""
        with self._db() as db:
            db.execute(
                "UPDATE students SET following = ?, seen = ? WHERE code = ? AND student = ?",
                (int(following), time.time(), clean_code(code), student),
            )

    def seen(self, code: str, student: str) -> None:
        """A student's page checked in (followers do, every second or two)."""
        with self._db() as db:
            db.execute("UPDATE students SET seen = ? WHERE code = ? AND student = ?",
                       (time.time(), clean_code(code), student))  # fmt: skip

    def students(self, code: str, within: float = FOLLOWING_WITHIN) -> tuple[int, int]:
        """(students seen in the last `within` seconds, of whom following); removed students are not counted."""
        row = (
            self._db()
            .execute(
                "SELECT COUNT(*) AS n, COALESCE(SUM(following), 0) AS f FROM students WHERE code = ? AND seen >= ? "
                "AND removed = 0",
                (clean_code(code), time.time() - within),
            )
            .fetchone()
        )
        return int(row["n"]), int(row["f"])

    # --- polls ---------------------------------------------------------------------------------------------------

    def start_poll(self, code: str, secret: str | None, kind: str, question: str, options: list[str],
                   view: dict) -> int:  # fmt: skip
        """The teacher asks a question about a view; its id. Students see the newest poll of their class; those
        following it now (seen in the last FOLLOWING_WITHIN seconds) are its voters, and only they may answer."""
        if kind not in POLL_KINDS:
            raise ValueError(f"unknown poll kind {kind!r}: one of {', '.join(POLL_KINDS)}")
        code = self._check(code, secret)
        now = time.time()
        with self._db() as db:
            cur = db.execute(
                "INSERT INTO polls (code, kind, question, options, view, created) VALUES (?,?,?,?,?,?)",
                (code, kind, question[:500], json.dumps(list(options)), json.dumps(view, sort_keys=True), now),
            )
            poll = int(cur.lastrowid)
            db.execute(
                "INSERT INTO voters (poll, student) SELECT ?, student FROM students WHERE code = ? AND following = 1 "
                "AND removed = 0 AND seen >= ?",
                (poll, code, now - FOLLOWING_WITHIN),
            )
            return poll

    def voters(self, poll_id: int) -> int:
        """How many students may answer a poll (those following when it was asked, less any removed since)."""
        return int(self._db().execute("SELECT COUNT(*) FROM voters WHERE poll = ?", (int(poll_id),)).fetchone()[0])

    def _standing(self, db, poll_id: int, student: str):
        """(revealed, voter) of a poll for a student, in one read; None when the poll does not exist."""
        return db.execute(
            "SELECT p.revealed, v.student IS NOT NULL AS voter FROM polls p LEFT JOIN voters v ON v.poll = p.id "
            "AND v.student = ? WHERE p.id = ?",
            (student[:64], int(poll_id)),
        ).fetchone()

    def may_answer(self, poll_id: int, student: str) -> bool:
        """Whether this student was following when the poll was asked (and it is not revealed yet)."""
        row = self._standing(self._db(), poll_id, student)
        return row is not None and bool(row["voter"]) and not row["revealed"]

    def _poll(self, row) -> Poll | None:
        if row is None:
            return None
        return Poll(row["id"], row["code"], row["kind"], row["question"], json.loads(row["options"]),
                    json.loads(row["view"]), row["created"], bool(row["revealed"]))  # fmt: skip

    def current_poll(self, code: str) -> Poll | None:
        """The class's newest poll, or None."""
        row = (
            self._db()
            .execute("SELECT * FROM polls WHERE code = ? ORDER BY id DESC LIMIT 1", (clean_code(code),))
            .fetchone()
        )
        return self._poll(row)

    def poll(self, poll_id: int) -> Poll | None:
        """A poll by id, or None."""
        return self._poll(self._db().execute("SELECT * FROM polls WHERE id = ?", (int(poll_id),)).fetchone())

    def answer(self, poll_id: int, student: str, answer: str) -> bool:
        """A student's answer: True if kept, False if they had already answered (one answer per student per poll).

        A number must be a percentage (0 to 100); a choice must be one of the poll's options; a revealed poll, or a
        student who was not following when it was asked, takes no answer (ValueError, in words for the student).
        """
        poll = self.poll(poll_id)
        if poll is None:
            raise ValueError("That poll does not exist.")
        self.get(poll.code)
        answer = str(answer).strip()[:MAX_ANSWER]
        if poll.kind == "number":
            try:
                value = float(answer)
            except ValueError as err:
                raise ValueError(f"{answer!r} is not a number") from err
            low, high = NUMBER_RANGE
            if not math.isfinite(value) or not low <= value <= high:
                raise ValueError(f"The answer is a percentage, from {low:g} to {high:g}.")
            answer = f"{value:g}"
        elif answer not in poll.options:
            raise ValueError("That answer is not one of the poll's choices.")
        with self._db() as db:
            row = self._standing(db, poll.id, student)  # inside the transaction: no reveal slips in between
            if row["revealed"]:
                raise ValueError("The teacher has revealed this question's answers: it takes no more.")
            if not row["voter"]:
                raise ValueError(
                    "This question was asked before this page joined the class (or while it was exploring alone): "
                    "it can answer the next one."
                )
            cur = db.execute(
                "INSERT OR IGNORE INTO answers (poll, student, answer, at) VALUES (?,?,?,?)",
                (poll.id, student[:64], answer, time.time()),
            )
            return cur.rowcount == 1

    def answered(self, poll_id: int, student: str) -> str | None:
        """The student's answer to a poll, or None."""
        row = (
            self._db()
            .execute("SELECT answer FROM answers WHERE poll = ? AND student = ?", (int(poll_id), student))
            .fetchone()
        )
        return None if row is None else row["answer"]

    def count(self, poll_id: int) -> int:
        """How many students have answered."""
        return int(self._db().execute("SELECT COUNT(*) FROM answers WHERE poll = ?", (int(poll_id),)).fetchone()[0])

    def reveal(self, code: str, secret: str | None, poll_id: int) -> None:
        """The teacher shows the class's answers."""
        code = self._check(code, secret)
        with self._db() as db:
            db.execute("UPDATE polls SET revealed = 1 WHERE id = ? AND code = ?", (int(poll_id), code))

    def results(self, poll_id: int) -> Counter:
        """{answer: how many students gave it}."""
        rows = self._db().execute("SELECT answer, COUNT(*) AS n FROM answers WHERE poll = ? GROUP BY answer",
                                  (int(poll_id),)).fetchall()  # fmt: skip
        return Counter({r["answer"]: int(r["n"]) for r in rows})

    def results_csv(self, code: str, secret: str | None, poll_id: int) -> str:
        """Every answer of a poll as CSV: poll, question, student's name (or id), answer, when (UTC ISO). The
        teacher's only (it names students): NotTeacher without the secret."""
        code = self._check(code, secret)
        poll = self.poll(poll_id)
        if poll is None or poll.code != code:
            raise ValueError("That poll is not this class's.")
        rows = (
            self._db()
            .execute(
                "SELECT a.student, a.answer, a.at, COALESCE(s.name, '') AS name FROM answers a "
                "LEFT JOIN students s ON s.code = ? AND s.student = a.student WHERE a.poll = ? ORDER BY a.at",
                (poll.code if poll else "", int(poll_id)),
            )
            .fetchall()
        )
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["poll", "question", "student", "answer", "answered_at_utc"])
        for r in rows:
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["at"]))
            writer.writerow([poll_id, poll.question if poll else "", _csv_safe(r["name"] or r["student"][:8]),
                             _csv_safe(r["answer"]), at])  # fmt: skip
        return out.getvalue()


FORMULA_STARTS = ("=", "+", "-", "@", "＝", "＋", "－", "＠")  # full-width forms: spreadsheets read them too


def _csv_safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula: one whose first character, or first after any leading
    whitespace, starts a formula (=, +, -, @, or their full-width forms), or that starts with a tab, return or
    newline, gets a leading apostrophe; plain numbers stay numbers."""
    try:
        if math.isfinite(float(text)) and text.strip() == text:
            return text
    except ValueError:
        pass
    risky = text[:1] in ("\t", "\r", "\n") or text.lstrip()[:1] in FORMULA_STARTS
    return "'" + text if risky else text


class _Transaction:
    """`with store._db() as db:` runs the block in one IMMEDIATE transaction (BEGIN ... COMMIT, or ROLLBACK)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, *args):
        return self.db.execute(*args)

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, value, tb) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
