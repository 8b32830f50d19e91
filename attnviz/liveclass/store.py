"""The classroom's store: classes, the teacher's view, followers, polls and answers, in SQLite or PostgreSQL.

The one module that reads and writes the classes, through SQLAlchemy Core: one set of statements on both databases
(what it hands out, its errors and limits: liveclass.records; the database: database; its tables: schema). On SQLite
every write is one `BEGIN IMMEDIATE` transaction; on PostgreSQL reads run in autocommit and every write is one
transaction that first locks its class's row (`SELECT ... FOR UPDATE`), so the writes of one class run one at a
time, as SQLite's are, and a reveal cannot slip between an answer's checks and its insert. Everything survives a
server restart.

Only the teacher leads: every call that changes a class (its view, a poll) takes the teacher's secret, which is
stored hashed and compared in constant time (`hmac.compare_digest`); a wrong or missing secret raises
`NotTeacher` and changes nothing. A student's answer is one row per (poll, student): a second answer is refused by
the primary key (`ON CONFLICT DO NOTHING`), not by a read-then-write that two requests could race through.

One voice per student: a poll takes answers only from the students who were following the class when it was
asked (its voters, written when it starts), never after its reveal; the teacher can close the class to new
students and remove one (their answers to open polls go with them). The answers with names are the teacher's
(`results_csv` takes the secret); students see the counts only.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection, RowMapping

from attnviz.liveclass import schema
from attnviz.liveclass.database import configured, database_url, postgres_engine, sqlite_engine
from attnviz.liveclass.records import (
    CODE_ALPHABET,
    CODE_LENGTH,
    FOLLOWING_WITHIN,
    MAX_ANSWER,
    MAX_STUDENT_NAME,
    NUMBER_RANGE,
    POLL_FORMS,
    REMOVED,
    ClassInfo,
    ClassNotFound,
    Moment,
    NotAdmitted,
    NotTeacher,
    Poll,
    answers_csv,
    class_hours,
    clean_code,
)

MOMENT_SQL = text(
    "SELECT c.*, p.id AS poll, p.revealed FROM classes c LEFT JOIN polls p ON p.id = "
    "(SELECT MAX(id) FROM polls WHERE code = c.code) WHERE c.code = :code"
)
REMOVED_SQL = text("SELECT student FROM students WHERE code = :code AND removed = 1")


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


class Store:
    """The classroom database. Safe to share between threads: connections come from a pool, one per call."""

    def __init__(self, target: Path | str | None = None) -> None:
        """target: a file path or a postgresql:// URL (default: ATTNVIZ_DB, else the user's data folder).
        BadDatabase for a value that is neither; OSError or SQLAlchemyError when it cannot be opened."""
        self.url = database_url(configured() if target is None else target)
        self.postgres = self.url.get_backend_name() == "postgresql"
        self.path = None if self.postgres else Path(self.url.database or "")  # the SQLite file, if that is the store
        self.engine = postgres_engine(self.url) if self.postgres else sqlite_engine(self.url)
        self._writer = self.engine.execution_options(attnviz_write=True)
        self._reader = self.engine.execution_options(isolation_level="AUTOCOMMIT") if self.postgres else self.engine
        with self._writer.begin() as db:
            schema.create(db, self.postgres)

    def __repr__(self) -> str:
        return f"Store({self.url.render_as_string(hide_password=True)!r})"

    def describe(self) -> str:
        """Where the classes live, for a person: "SQLite file /path" or "PostgreSQL host:port/db" (no password)."""
        if self.postgres:
            return f"PostgreSQL {self.url.host or 'localhost'}:{self.url.port or 5432}/{self.url.database}"
        return f"SQLite file {self.path}"

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        self.engine.dispose()

    @contextlib.contextmanager
    def _write(self, code: str | None = None) -> Iterator[Connection]:
        """One write transaction (committed at the end of the block, rolled back on an error). On PostgreSQL it
        first locks the class's row: the writes of one class run one at a time (SQLite's lock is the file's)."""
        with self._writer.begin() as db:
            if code is not None and self.postgres:
                db.execute(text("SELECT 1 FROM classes WHERE code = :code FOR UPDATE"), {"code": code})
            yield db

    def _one(self, sql: str, **params) -> RowMapping | None:
        with self._reader.connect() as db:
            return db.execute(text(sql), params).mappings().first()

    def _all(self, sql: str, **params) -> list[RowMapping]:
        with self._reader.connect() as db:
            return list(db.execute(text(sql), params).mappings())

    def _value(self, sql: str, **params):
        with self._reader.connect() as db:
            return db.execute(text(sql), params).scalar()

    # --- classes -------------------------------------------------------------------------------------------------

    def create_class(self, view: dict | None = None, hours: float | None = None) -> tuple[str, str, float]:
        """A new class: (code, the teacher's secret, when it expires). The secret is shown once, stored hashed."""
        hours = class_hours() if hours is None else hours
        if not 0 < hours <= 24 * 30:
            raise ValueError(f"A class lasts more than 0 and at most 720 hours, not {hours:g}.")
        secret = secrets.token_urlsafe(24)
        now = time.time()
        expires = now + 3600 * hours
        with self._write() as db:
            for _ in range(20):
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                cur = db.execute(
                    text(
                        "INSERT INTO classes (code, secret_hash, created, expires, view, changed) "
                        "VALUES (:code, :hash, :now, :expires, :view, :now) ON CONFLICT (code) DO NOTHING"
                    ),
                    {
                        "code": code,
                        "hash": _hash(secret),
                        "now": now,
                        "expires": expires,
                        "view": json.dumps(view or {}),
                    },
                )
                if cur.rowcount == 1:  # else that code is taken: draw another
                    return code, secret, expires
        raise RuntimeError("could not find a free class code")

    def get(self, code: str) -> ClassInfo:
        """The class, or ClassNotFound (also once it has expired)."""
        row = self._one("SELECT * FROM classes WHERE code = :code", code=clean_code(code))
        if row is None or row["expires"] < time.time():
            raise ClassNotFound(ClassNotFound.message(code))
        return ClassInfo(
            row["code"], row["created"], row["expires"], json.loads(row["view"]), row["version"], row["changed"]
        )

    def moment(self, code: str) -> Moment | None:
        """The class, its newest poll and its removed students, on one connection (what a follower needs each beat
        and each run); None when the class does not exist or has ended."""
        code = clean_code(code)
        with self._reader.connect() as db:
            row = db.execute(MOMENT_SQL, {"code": code}).mappings().first()
            if row is None or row["expires"] < time.time():
                return None
            removed = frozenset(db.execute(REMOVED_SQL, {"code": code}).scalars())
        info = ClassInfo(
            row["code"], row["created"], row["expires"], json.loads(row["view"]), row["version"], row["changed"]
        )
        return Moment(info, row["poll"], bool(row["revealed"]), removed)

    def is_teacher(self, code: str, secret: str | None) -> bool:
        """Whether `secret` is this class's: compared in constant time; False for no secret or no class."""
        if not secret:
            return False
        stored = self._value("SELECT secret_hash FROM classes WHERE code = :code", code=clean_code(code))
        return stored is not None and hmac.compare_digest(stored, _hash(secret))

    def _check(self, code: str, secret: str | None) -> str:
        code = clean_code(code)
        self.get(code)
        if not self.is_teacher(code, secret):
            raise NotTeacher("Only the teacher can do that (the teacher link carries the class's secret).")
        return code

    def set_view(self, code: str, secret: str | None, view: dict) -> int:
        """The teacher's view becomes the class's; its new version number. Unchanged views keep their version."""
        code = self._check(code, secret)
        view_text = json.dumps(view, sort_keys=True)
        with self._write(code) as db:
            db.execute(
                text(
                    "UPDATE classes SET view = :view, version = version + 1, changed = :now "
                    "WHERE code = :code AND view != :view"
                ),
                {"view": view_text, "now": time.time(), "code": code},
            )
            return db.execute(text("SELECT version FROM classes WHERE code = :code"), {"code": code}).scalar_one()

    # --- students ------------------------------------------------------------------------------------------------

    def join(self, code: str, student: str, name: str = "") -> None:
        """A student joins (or comes back); their name, optional, is kept as typed (escape it to show it).
        NotAdmitted for a new student of a closed class, or a student the teacher removed."""
        code = self.get(code).code
        student = student[:64]
        with self._write(code) as db:
            removed = db.execute(
                text("SELECT removed FROM students WHERE code = :code AND student = :student"),
                {"code": code, "student": student},
            ).first()
            if removed is not None and removed[0]:
                raise NotAdmitted(REMOVED)
            locked = db.execute(text("SELECT locked FROM classes WHERE code = :code"), {"code": code}).scalar()
            if removed is None and locked:
                raise NotAdmitted("The teacher has closed this class to new students.")
            now = time.time()
            db.execute(
                text(
                    "INSERT INTO students (code, student, name, seen, joined) VALUES (:code, :student, :name, :now, "
                    ":now) ON CONFLICT (code, student) DO UPDATE SET name = CASE WHEN excluded.name != '' THEN "
                    "excluded.name ELSE students.name END, seen = excluded.seen"
                ),
                {"code": code, "student": student, "name": str(name or "")[:MAX_STUDENT_NAME], "now": now},
            )

    def lock(self, code: str, secret: str | None, locked: bool) -> None:
        """The teacher closes the class to new students (those already in stay), or opens it again."""
        code = self._check(code, secret)
        with self._write(code) as db:
            db.execute(
                text("UPDATE classes SET locked = :locked WHERE code = :code"), {"locked": int(locked), "code": code}
            )

    def locked(self, code: str) -> bool:
        """Whether the class takes no new students."""
        return bool(self._value("SELECT locked FROM classes WHERE code = :code", code=clean_code(code)))

    def remove(self, code: str, secret: str | None, student: str) -> None:
        """The teacher removes a student: they cannot come back or answer, and their answers to the polls not yet
        revealed are dropped."""
        code = self._check(code, secret)
        params = {"code": code, "student": student}
        open_polls = "SELECT id FROM polls WHERE code = :code AND revealed = 0"
        with self._write(code) as db:
            db.execute(text("UPDATE students SET removed = 1 WHERE code = :code AND student = :student"), params)
            db.execute(text(f"DELETE FROM answers WHERE student = :student AND poll IN ({open_polls})"), params)
            db.execute(text(f"DELETE FROM voters WHERE student = :student AND poll IN ({open_polls})"), params)

    def roster(self, code: str, secret: str | None) -> list[dict]:
        """The teacher's list of the students seen in the last FOLLOWING_WITHIN seconds: id, name, following."""
        code = self._check(code, secret)
        rows = self._all(
            "SELECT student, name, following FROM students WHERE code = :code AND removed = 0 AND seen >= :since "
            "ORDER BY joined",
            code=code,
            since=time.time() - FOLLOWING_WITHIN,
        )
        return [{"student": r["student"], "name": r["name"], "following": bool(r["following"])} for r in rows]

    def set_following(self, code: str, student: str, following: bool) -> None:
        """A student follows the teacher, or explores alone (and can rejoin)."""
        with self._write() as db:
            db.execute(
                text(
                    "UPDATE students SET following = :following, seen = :now WHERE code = :code AND student = :student"
                ),
                {"following": int(following), "now": time.time(), "code": clean_code(code), "student": student},
            )

    def seen(self, code: str, student: str) -> None:
        """A student's page checked in (followers do, every ten seconds)."""
        with self._write() as db:
            db.execute(
                text("UPDATE students SET seen = :now WHERE code = :code AND student = :student"),
                {"now": time.time(), "code": clean_code(code), "student": student},
            )

    def students(self, code: str, within: float = FOLLOWING_WITHIN) -> tuple[int, int]:
        """(students seen in the last `within` seconds, of whom following); removed students are not counted."""
        row = self._one(
            "SELECT COUNT(*) AS n, COALESCE(SUM(following), 0) AS f FROM students WHERE code = :code "
            "AND seen >= :since AND removed = 0",
            code=clean_code(code),
            since=time.time() - within,
        )
        return (int(row["n"]), int(row["f"])) if row is not None else (0, 0)  # COUNT(*) gives a row

    # --- polls ---------------------------------------------------------------------------------------------------

    def start_poll(
        self, code: str, secret: str | None, form: str, question: str, options: list[str], view: dict
    ) -> int:
        """The teacher asks a question about a view; its id. Students see the newest poll of their class; those
        following it now (seen in the last FOLLOWING_WITHIN seconds) are its voters, and only they may answer."""
        if form not in POLL_FORMS:
            raise ValueError(f"unknown poll form {form!r}: one of {', '.join(POLL_FORMS)}")
        code = self._check(code, secret)
        now = time.time()
        with self._write(code) as db:
            poll = db.execute(
                text(
                    "INSERT INTO polls (code, kind, question, options, view, created) "
                    "VALUES (:code, :kind, :question, :options, :view, :now) RETURNING id"
                ),
                {
                    "code": code,
                    "kind": form,
                    "question": question[:500],
                    "options": json.dumps(list(options)),
                    "view": json.dumps(view, sort_keys=True),
                    "now": now,
                },
            ).scalar_one()
            db.execute(
                text(
                    "INSERT INTO voters (poll, student) SELECT CAST(:poll AS INTEGER), student FROM students "
                    "WHERE code = :code AND following = 1 AND removed = 0 AND seen >= :since"
                ),
                {"poll": poll, "code": code, "since": now - FOLLOWING_WITHIN},
            )
            return int(poll)

    def voters(self, poll_id: int) -> int:
        """How many students may answer a poll (those following when it was asked, less any removed since)."""
        return int(self._value("SELECT COUNT(*) FROM voters WHERE poll = :poll", poll=int(poll_id)))

    _STANDING = (
        "SELECT p.revealed, CASE WHEN v.student IS NULL THEN 0 ELSE 1 END AS voter FROM polls p "
        "LEFT JOIN voters v ON v.poll = p.id AND v.student = :student WHERE p.id = :poll"
    )

    def may_answer(self, poll_id: int, student: str) -> bool:
        """Whether this student was following when the poll was asked (and it is not revealed yet)."""
        row = self._one(self._STANDING, student=student[:64], poll=int(poll_id))
        return row is not None and bool(row["voter"]) and not row["revealed"]

    def _poll(self, row) -> Poll | None:
        if row is None:
            return None
        return Poll(
            row["id"],
            row["code"],
            row["kind"],
            row["question"],
            json.loads(row["options"]),
            json.loads(row["view"]),
            row["created"],
            bool(row["revealed"]),
        )

    def current_poll(self, code: str) -> Poll | None:
        """The class's newest poll, or None."""
        return self._poll(
            self._one("SELECT * FROM polls WHERE code = :code ORDER BY id DESC LIMIT 1", code=clean_code(code))
        )

    def poll(self, poll_id: int) -> Poll | None:
        """A poll by id, or None."""
        return self._poll(self._one("SELECT * FROM polls WHERE id = :poll", poll=int(poll_id)))

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
        if poll.form == "number":
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
        with self._write(poll.code) as db:  # the checks and the insert in one transaction: no reveal slips between
            row = db.execute(text(self._STANDING), {"student": student[:64], "poll": poll.id}).mappings().one()
            if row["revealed"]:
                raise ValueError("The teacher has revealed this question's answers: it takes no more.")
            if not row["voter"]:
                raise ValueError(
                    "This question was asked before this page joined the class (or while it was exploring alone): "
                    "it can answer the next one."
                )
            cur = db.execute(
                text(
                    "INSERT INTO answers (poll, student, answer, at) VALUES (:poll, :student, :answer, :now) "
                    "ON CONFLICT (poll, student) DO NOTHING"
                ),
                {"poll": poll.id, "student": student[:64], "answer": answer, "now": time.time()},
            )
            return cur.rowcount == 1

    def answered(self, poll_id: int, student: str) -> str | None:
        """The student's answer to a poll, or None."""
        return self._value(
            "SELECT answer FROM answers WHERE poll = :poll AND student = :student", poll=int(poll_id), student=student
        )

    def count(self, poll_id: int) -> int:
        """How many students have answered."""
        return int(self._value("SELECT COUNT(*) FROM answers WHERE poll = :poll", poll=int(poll_id)))

    def reveal(self, code: str, secret: str | None, poll_id: int) -> None:
        """The teacher shows the class's answers."""
        code = self._check(code, secret)
        with self._write(code) as db:
            db.execute(
                text("UPDATE polls SET revealed = 1 WHERE id = :poll AND code = :code"),
                {"poll": int(poll_id), "code": code},
            )

    def results(self, poll_id: int) -> Counter:
        """{answer: how many students gave it}."""
        rows = self._all(
            "SELECT answer, COUNT(*) AS n FROM answers WHERE poll = :poll GROUP BY answer", poll=int(poll_id)
        )
        return Counter({r["answer"]: int(r["n"]) for r in rows})

    def results_csv(self, code: str, secret: str | None, poll_id: int) -> str:
        """Every answer of a poll as CSV: poll, question, student's name (or id), answer, when (UTC ISO). The
        teacher's only (it names students): NotTeacher without the secret."""
        code = self._check(code, secret)
        poll = self.poll(poll_id)
        if poll is None or poll.code != code:
            raise ValueError("That poll is not this class's.")
        rows = self._all(
            "SELECT a.student, a.answer, a.at, COALESCE(s.name, '') AS name FROM answers a "
            "LEFT JOIN students s ON s.code = :code AND s.student = a.student WHERE a.poll = :poll ORDER BY a.at",
            code=poll.code,
            poll=int(poll_id),
        )
        return answers_csv(poll_id, poll.question, rows)
