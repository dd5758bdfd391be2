"""On PostgreSQL too, the shoe's rows hold neither order nor salt until the reveal; the audit
reads them without the key (a shoe in play counted as secret, a revealed one verified)."""

from __future__ import annotations

import json
import secrets

import psycopg
import pytest
from psycopg import sql

from services.shared.platform.settings import Settings
from services.shared.platform.store import open_application
from services.shoe.application import ShoeApplication
from services.shoe.domain import Shoe
from services.tools.audit.auditor import audit
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import PostgresStore
from tests.signing_keys import key_env

pytestmark = pytest.mark.postgres


def test_a_postgres_row_holds_neither_order_nor_salt_and_the_audit_needs_no_key(
    postgres_env: dict[str, str],
) -> None:
    env = {
        **postgres_env,
        "PB_PERSISTENCE": "postgres",
        "PB_POSTGRES_SCHEMA_PREFIX": f"secret{secrets.token_hex(3)}_",
        **key_env(),
    }
    settings = Settings.from_env("shoe", env)
    app = open_application(lambda es: ShoeApplication(env=es), settings)
    try:
        for shoe_id in ("s1", "s2"):
            app.shuffle_shoe("t1", shoe_id, 1, 14)
            app.draw_cards("t1", shoe_id, "c1", f"{shoe_id}.r1", 5)
        app.close_shoe("t1", "s1")
        in_play = app.get_shoe("t1", "s2")
        assert in_play is not None
    finally:
        app.close()
    pg = settings.postgres
    with psycopg.connect(
        host=pg.host, port=pg.port, dbname=pg.dbname, user=pg.user, password=pg.password
    ) as connection:
        rows = connection.execute(
            sql.SQL("SELECT topic, state FROM {} ORDER BY notification_id").format(
                sql.Identifier(settings.postgres_schema, "shoe_events")
            )
        ).fetchall()
    everything = b"".join(bytes(state) for _, state in rows)
    runs = [json.dumps(in_play.order[i : i + 3])[1:-1].encode() for i in range(5 + 8, 50)]
    assert in_play.salt.encode() not in everything
    assert [run for run in runs if run in everything] == []
    (shuffled,) = [
        json.loads(bytes(state))
        for topic, state in rows
        if topic == Shoe.Shuffled.TOPIC and b'"shoe_id":"s2"' in bytes(state)
    ]
    assert (shuffled["order"], shuffled["salt"], shuffled["encrypted"]["kid"]) == (
        None,
        None,
        "shoe-secret-1",
    )
    # The audit reads the store with no key at all (only where the store is).
    auditor = Settings.from_env("shoe", {k: v for k, v in env.items() if "SECRET" not in k})
    store = PostgresStore(auditor)
    try:
        report = audit(
            {
                "shoe": store,
                "dealing": ListStore("dealing", []),
                "settlement": ListStore("settlement", []),
            }
        )
    finally:
        store.close()
    problems = [f for f in report.findings if f.code.value not in ("not_sealed",)]
    assert problems == [], [str(f) for f in problems]
    assert report.checked["shoes"] == 2 and report.checked["shoes_secret"] == 1
