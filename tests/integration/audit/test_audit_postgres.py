"""The same audit on PostgreSQL stores; tampering applied with psycopg is found and located."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from services.shared.platform.settings import Settings
from services.tools.audit.auditor import audit
from services.tools.audit.findings import Code
from services.tools.audit.stores import open_stores
from tests.integration.audit.helpers import audit_settings, play_on
from tests.signing_keys import key_env
from tests.unit.audit.helpers import streamed, whole_history

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_settings(postgres_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Settings:
    env = {
        **postgres_env,
        "PB_DATA_DIR": str(tmp_path_factory.mktemp("audit-postgres")),  # the supervisor's key
        "PB_PERSISTENCE": "postgres",
        "PB_POSTGRES_SCHEMA_PREFIX": f"audit{secrets.token_hex(3)}_",
        **key_env(),  # the shoe's secret key (the audit needs none)
    }
    settings = Settings.from_env("shoe", env)
    play_on(settings, coups=10)
    return settings


@pytest.fixture
def dealing(pg_settings: Settings) -> Iterator[tuple[psycopg.Connection, sql.Composable]]:
    own = pg_settings.for_service("dealing")
    pg = own.postgres
    with psycopg.connect(
        host=pg.host, port=pg.port, dbname=pg.dbname, user=pg.user, password=pg.password
    ) as connection:
        yield connection, sql.Identifier(own.postgres_schema, "dealing_events")


def test_a_postgres_history_audits_clean(pg_settings: Settings) -> None:
    report = audit_settings(pg_settings)
    assert report.findings == [], [str(f) for f in report.findings]
    assert report.checked["coups"] == 2 * 10 + 2
    assert all(seal.seals == 1 for seal in report.seals.values())
    stores = open_stores(pg_settings)
    try:
        assert streamed(report) == whole_history(stores)  # streamed: as the whole history
        dealing = stores["dealing"]
        rows = dealing.rows()
        first = next(rows)  # reading, in its transaction: one aggregate's rows read again
        oid = next(row[1] for row in first if row[3].endswith("Coup.BettingOpened"))
        again = list(dealing.rows_of(oid, first[-1][0] + 1))
        assert again == [row for row in first if row[1] == oid] and len(again) > 3
        assert [r[0] for r in dealing.rows_of(oid, again[2][0])] == [r[0] for r in again[:2]]
        rows.close()
    finally:
        for store in stores.values():
            store.close()


def test_a_postgres_audit_resumes_from_its_checkpoint(
    pg_settings: Settings, tmp_path: Path
) -> None:
    """The seal the checkpoint names is read back by version, the stores from after it:
    with nothing new since, the resumed audit checks nothing again and counts the same."""
    checkpoint = tmp_path / "audit.checkpoint"
    stores = open_stores(pg_settings)
    try:
        first = audit(stores, checkpoint=checkpoint)
        assert first.findings == [] and checkpoint.is_file()
        again = audit(stores, checkpoint=checkpoint)
    finally:
        for store in stores.values():
            store.close()
    assert again.findings == [], [str(f) for f in again.findings]
    assert again.checked == first.checked and again.checked["coups"] >= 2 * 10 - 2 * 3
    assert again.totals.to_json() == first.totals.to_json()
    assert sum(again.events.values()) < sum(first.events.values()) / 10


def _ids(connection: psycopg.Connection, table: sql.Composable, n: int) -> list[int]:
    rows = connection.execute(
        sql.SQL(
            "SELECT notification_id FROM {} WHERE topic LIKE %s ORDER BY notification_id"
        ).format(table),
        ("%Coup.CardDealt",),
    ).fetchall()
    return [int(r[0]) for r in rows[n : n + 2]]


def _tamper_then_undo(
    connection: psycopg.Connection,
    change: Callable[[], None],
    undo: Callable[[], None],
    settings: Settings,
) -> list[tuple[Code, int | None]]:
    change()
    connection.commit()
    try:
        report = audit_settings(settings)
    finally:
        undo()
        connection.commit()
    return [(f.code, f.notification_id) for f in report.errors]


def test_edit_delete_insert_and_swap_are_located(
    pg_settings: Settings, dealing: tuple[psycopg.Connection, sql.Composable]
) -> None:
    connection, table = dealing
    a, b = _ids(connection, table, 5)
    q = connection.execute
    row = q(
        sql.SQL(
            "SELECT originator_id, originator_version, topic, state FROM {} "
            "WHERE notification_id = %s"
        ).format(table),
        (a,),
    ).fetchone()
    assert row is not None
    oid, version, topic, state = row

    edit = _tamper_then_undo(
        connection,
        lambda: q(
            sql.SQL("UPDATE {} SET state = %s WHERE notification_id = %s").format(table),
            (bytes(state).replace(b'"card":"', b'"card":"9'), a),
        ),
        lambda: q(
            sql.SQL("UPDATE {} SET state = %s WHERE notification_id = %s").format(table),
            (state, a),
        ),
        pg_settings,
    )
    assert (Code.ROW_ALTERED, a) in edit

    delete = _tamper_then_undo(
        connection,
        lambda: q(sql.SQL("DELETE FROM {} WHERE notification_id = %s").format(table), (a,)),
        lambda: q(
            sql.SQL(
                "INSERT INTO {} (originator_id, originator_version, topic, state, "
                "notification_id) VALUES (%s, %s, %s, %s, %s)"
            ).format(table),
            (oid, version, topic, state, a),
        ),
        pg_settings,
    )
    assert (Code.ROW_DELETED, a) in delete

    def swap() -> None:
        q(
            sql.SQL("UPDATE {} SET notification_id = -1 WHERE notification_id = %s").format(table),
            (a,),
        )
        q(
            sql.SQL("UPDATE {} SET notification_id = %s WHERE notification_id = %s").format(table),
            (a, b),
        )
        q(
            sql.SQL("UPDATE {} SET notification_id = %s WHERE notification_id = -1").format(table),
            (b,),
        )

    swapped = _tamper_then_undo(connection, swap, swap, pg_settings)
    assert (Code.ROWS_SWAPPED, a) in swapped

    forged_version = 1000

    def insert() -> None:
        q(
            sql.SQL(
                "UPDATE {} SET notification_id = -notification_id - 1 WHERE notification_id > %s"
            ).format(table),
            (a,),
        )
        q(
            sql.SQL(
                "UPDATE {} SET notification_id = -notification_id WHERE notification_id < 0"
            ).format(table)
        )
        q(
            sql.SQL(
                "INSERT INTO {} (originator_id, originator_version, topic, state, "
                "notification_id) VALUES (%s, %s, %s, %s, %s)"
            ).format(table),
            (oid, forged_version, topic, state, a + 1),
        )

    def remove() -> None:
        q(sql.SQL("DELETE FROM {} WHERE notification_id = %s").format(table), (a + 1,))
        q(
            sql.SQL(
                "UPDATE {} SET notification_id = -notification_id + 1 WHERE notification_id > %s"
            ).format(table),
            (a + 1,),
        )
        q(
            sql.SQL(
                "UPDATE {} SET notification_id = -notification_id WHERE notification_id < 0"
            ).format(table)
        )

    inserted = _tamper_then_undo(connection, insert, remove, pg_settings)
    assert (Code.ROW_INSERTED, a + 1) in inserted

    assert audit_settings(pg_settings).findings == []  # every change undone: clean again
