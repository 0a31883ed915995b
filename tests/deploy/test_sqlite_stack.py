"""The SQLite DB every local stack starts from is in write-ahead mode.

Without it a reader's lock kept a writer from committing: with four tasks reading
their pool through the API server at once, every service of a stack stalled for the
30 s lock timeout and the scheduler reset its own running tasks as orphans.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from devstack.stack import AirflowStack, prepared_sqlite_db

pytestmark = pytest.mark.airflow


def _journal_mode(path: Path) -> str:
    with closing(sqlite3.connect(path)) as db:
        return str(db.execute("PRAGMA journal_mode").fetchone()[0])


def test_the_prepared_db_and_a_stack_copied_from_it_write_ahead(tmp_path: Path) -> None:
    template = prepared_sqlite_db()
    assert _journal_mode(template) == "wal"
    # nothing of the template waits in a log file a copy would miss
    log = template.with_name(template.name + "-wal")
    assert not log.exists() or log.stat().st_size == 0
    stack = AirflowStack(home=tmp_path, database_url=f"sqlite:///{tmp_path}/airflow.db")
    stack.prepare_from(template)
    stack.engine.dispose()
    assert _journal_mode(tmp_path / "airflow.db") == "wal"
    with closing(sqlite3.connect(tmp_path / "airflow.db")) as db:
        assert db.execute("select count(*) from slot_pool").fetchone()[0] >= 2
