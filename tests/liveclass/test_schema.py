"""The classroom's tables: a database made by an older attnviz is brought up to them on start."""

from attnviz.liveclass import database
from attnviz.liveclass.store import Store


def test_a_database_from_an_older_attnviz_is_migrated_on_start(store_target):
    import sqlalchemy as sa

    # REAL in SQLite files of older attnviz; DOUBLE PRECISION here, which SQLite reads the same way (PostgreSQL's
    # REAL is single precision: a time.time() in it is off by up to a minute).
    old = sa.create_engine(database.database_url(store_target))
    with old.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE classes (code TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, "
            "created DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL, view TEXT NOT NULL DEFAULT '{}', "
            "version INTEGER NOT NULL DEFAULT 0, "
            "changed DOUBLE PRECISION NOT NULL DEFAULT 0)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE students (code TEXT NOT NULL, student TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', "
            "following INTEGER NOT NULL DEFAULT 1, seen DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, student))"
        )
    old.dispose()
    db = Store(store_target)
    code, secret, _ = db.create_class()
    db.join(code, "s1")
    db.lock(code, secret, True)
    assert db.locked(code) and db.students(code) == (1, 1)
    db.close()
