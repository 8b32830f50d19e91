"""Where the classes live: ATTNVIZ_DB read as a path or a postgresql:// URL and nothing else, a database's failure
said in one line with no statement and no password, an unreachable PostgreSQL never a SQLite file."""

import pytest

from attnviz.liveclass import database, records
from attnviz.liveclass.store import Store


def test_the_default_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNVIZ_DB", str(tmp_path / "x.db"))
    assert database.default_path() == tmp_path / "x.db"
    monkeypatch.delenv("ATTNVIZ_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert database.default_path() == tmp_path / "attnviz" / "classes.db"
    monkeypatch.setenv("ATTNVIZ_CLASS_HOURS", "bad")
    assert records.class_hours() == records.DEFAULT_HOURS


def test_the_database_setting_is_a_path_or_a_postgresql_url_and_nothing_else(tmp_path):
    url = database.database_url("postgresql://teacher:pw@db.school:5432/attnviz")
    assert url.drivername == "postgresql+psycopg" and url.host == "db.school" and url.database == "attnviz"
    assert database.database_url("postgres://u@h/x").drivername == "postgresql+psycopg"
    assert database.database_url(tmp_path / "c.db").database == str(tmp_path / "c.db")
    for bad, says in [
        ("mysql://u@h/x", "not a database attnviz can use"),
        ("sqlite:///tmp/x.db", "not a database attnviz can use"),
        ("postgresql:host/db", "not a database attnviz can use"),  # no //: would be a folder named "postgresql:"
        ("postgresql://u@h:5432", "names no database"),
        ("postgresql://u@h:notaport/x", "not a URL PostgreSQL can take"),
        ("  ", "empty"),
        (str(tmp_path), "is a folder"),
    ]:
        with pytest.raises(database.BadDatabase, match=says):
            Store(bad)
    assert not (tmp_path / "postgresql:").exists()
    with pytest.raises(database.BadDatabase) as said:
        Store("mysql://teacher:hunter2@db/x")
    assert "hunter2" not in str(said.value) and "teacher:***@db" in str(said.value)


def test_a_database_error_is_one_line_with_no_statement_and_no_password():
    import sqlalchemy as sa

    err = sa.exc.OperationalError(
        "SELECT secret_hash FROM classes WHERE code = :code",
        {"code": "ABCDEF"},
        Exception("could not reach postgresql://u:pw@db:5432/x"),
    )
    assert "SELECT" in str(err) and "ABCDEF" in str(err)  # SQLAlchemy's own text names both
    line = database.error_line(err)
    assert "\n" not in line and "SELECT" not in line and "ABCDEF" not in line and "pw" not in line
    assert "could not reach postgresql://u:***@db:5432/x" in line


@pytest.mark.slow  # 0.45 s or more in a full run: the fast loop leaves it to make test
def test_an_unreachable_postgresql_is_an_error_and_never_a_sqlite_file(tmp_path, monkeypatch):
    import sqlalchemy as sa

    monkeypatch.chdir(tmp_path)
    with pytest.raises(sa.exc.OperationalError):
        Store("postgresql://postgres@127.0.0.1:1/attnviz")  # nothing listens on port 1
    assert list(tmp_path.iterdir()) == []  # no "postgresql:" folder, no SQLite file
