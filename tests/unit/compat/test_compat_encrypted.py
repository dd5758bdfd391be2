"""The shoes stored encrypted (``shoe.encrypted.rows.jsonl``) read forever, with their keys.

Two shoes of table t3: t3.shoe-1 under the older key id, dealt and revealed; t3.shoe-2
under the newer one (after a rotation), still in play. A later tree must decrypt them
with the same key set (the envelope, its binding and the plaintext never change under
``jwe-dir-a256gcm/v1``), store them again byte for byte, and audit them without the key.
"""

from __future__ import annotations

from services.shoe.application import ShoeApplication
from services.tools.audit.auditor import audit
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import SERVICES, Row
from tests.unit.compat.golden import app_env, encrypted_rows, stored


def test_every_encrypted_row_round_trips_byte_for_byte() -> None:
    mapper = ShoeApplication(env=app_env("shoe", PERSISTENCE_MODULE="eventsourcing.popo")).mapper
    for row in encrypted_rows():
        record = stored(row)
        again = mapper.to_stored_event(mapper.to_domain_event(record))
        assert (again.topic, again.state) == (record.topic, record.state), row["id"]


def test_the_audit_without_the_key_checks_the_revealed_shoe_and_counts_the_secret_one() -> None:
    rows = [
        Row(
            r["id"],
            bytes.fromhex(r["originator_id"]),
            r["version"],
            r["topic"],
            r["state"].encode(),
        )
        for r in encrypted_rows()
    ]
    stores = {name: ListStore(name, rows if name == "shoe" else []) for name in SERVICES}
    report = audit(stores)
    assert [str(f) for f in report.findings if f.code.value != "not_sealed"] == []
    assert report.checked["shoes"] == 2 and report.checked["shoes_secret"] == 1
