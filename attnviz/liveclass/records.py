"""What the class store hands out and takes in: a class's records, its errors, its codes and links, its limits.

No database here (attnviz.liveclass.store reads and writes them): the pages, the command line and the tests name a
class's values through this module.
"""

from __future__ import annotations

import csv
import io
import os
import time
from dataclasses import dataclass

from attnviz.escape import csv_cell

HOURS_ENV = "ATTNVIZ_CLASS_HOURS"
DEFAULT_HOURS = 8.0  # a class expires this long after it was started
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a projector
CODE_LENGTH = 6
POLL_FORMS = ("token", "head type", "number", "which head")  # what a poll asks for: a word, a label, ...
MAX_STUDENT_NAME = 40
MAX_ANSWER = 200
FOLLOWING_WITHIN = 30.0  # a student seen this recently (seconds) counts as here
NUMBER_RANGE = (0.0, 100.0)  # a number poll asks for a percentage


class NotTeacher(PermissionError):
    """A call that only the teacher may make came without the class's secret."""


class ClassNotFound(LookupError):
    """No class has this code, or it has expired."""

    @staticmethod
    def message(code: str) -> str:
        """What a person is told."""
        return f"No class has the code {clean_code(code) or '(none)'}, or it has ended."


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
class Moment:
    """A class as a follower checks it: the class, its newest poll and the students the teacher removed."""

    info: ClassInfo
    poll: int | None  # the newest poll's id, None before the first
    revealed: bool  # whether that poll's answers are shown
    removed: frozenset[str] = frozenset()  # the ids of the students the teacher removed

    def pulse(self) -> tuple[int, int | None, bool]:
        """(view version, newest poll id, revealed): what tells a follower's page to draw again."""
        return self.info.version, self.poll, self.revealed


@dataclass(frozen=True)
class Poll:
    """A question the teacher asked, about one view."""

    id: int
    code: str
    form: str  # one of POLL_FORMS (stored in the polls table's column `kind`)
    question: str
    options: list[str]  # what students choose from (empty for a number)
    view: dict  # the view the question is about (model, text, layer, head, query token, ...)
    created: float
    revealed: bool


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


def clean_code(code: object) -> str:
    """A typed class code as stored: upper case, spaces and dashes dropped; '' when it cannot be one."""
    text = "".join(str(code or "").split()).replace("-", "").upper()
    return text if len(text) == CODE_LENGTH and all(c in CODE_ALPHABET for c in text) else ""


def answers_csv(poll_id: int, question: str, rows) -> str:
    """A poll's answers as CSV (poll, question, student's name or id, answer, when in UTC ISO), every cell one a
    spreadsheet will not run as a formula; `rows` as the store reads them (student, name, answer, at)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["poll", "question", "student", "answer", "answered_at_utc"])
    for r in rows:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r["at"]))
        writer.writerow([poll_id, question, csv_cell(r["name"] or r["student"][:8]), csv_cell(r["answer"]), at])
    return out.getvalue()
