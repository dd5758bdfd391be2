"""Seal anchors find what a store writer can hide from the store's own chain.

The attacker has full write access to a store (and could recompute its seal chain), not the
service's signing key: every rewrite below passes the store's own chain, and the anchors the
relay published (signed, outside the store) find it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from contracts import SEALS, SealAnchored, decode
from services.dev.simulation import LocalSystem, play
from services.shared.platform.security.signing import Keyring, KeyringEntry, Signer, Where, b64url
from services.tools.audit.anchor_reader import AnchorRecords
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.findings import Code, Severity
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.report import to_json, to_text
from services.tools.audit.stores import Row
from tests.unit.audit.anchoring import (
    SERVICES,
    Record,
    read,
    relay_anchors,
    reseal,
    seal_rows,
    signers,
)
from tests.unit.audit.helpers import Played, codes, edit_state, only

SEALS_0 = Where("", SEALS, 0)
"""Where the anchors of these tests are: partition 0 of the seals topic (no prefix)."""

SEAL_CODES = {
    Code.ROW_ALTERED,
    Code.ROW_DELETED,
    Code.ROW_INSERTED,
    Code.SEAL_BROKEN,
    Code.SEAL_CHAIN_BROKEN,
    Code.UNSEALED_TAIL,
    Code.VERSION_GAP,
}


@pytest.fixture(scope="module")
def played() -> Played:
    """Three tables played one after the other, every store sealed after each: 3 seals."""
    system = LocalSystem.in_memory()
    logs = {}
    for number in (1, 2, 3):
        table = f"t{number}"
        logs[table] = play(system, table, 3, bets_per_coup=4, decks=1, seed=number)
        system.pump()
        system.seal()
    return Played(system, logs)


@pytest.fixture(scope="module")
def keys() -> tuple[dict[str, Signer], Any]:
    return signers()


@pytest.fixture(scope="module")
def published(played: Played, keys: tuple[dict[str, Signer], Any]) -> dict[str, list[Record]]:
    """Each service's anchors, as its relay signs them."""
    made, _keyring = keys
    return {s: relay_anchors(played.system.apps[s], s, made[s]) for s in SERVICES}


def _audit(rows: dict[str, list[Row]], anchors: AnchorRecords | None) -> AuditReport:
    return audit({name: ListStore(name, list(r)) for name, r in rows.items()}, anchors=anchors)


def _all(published: dict[str, list[Record]]) -> list[Record]:
    return [record for records in published.values() for record in records]


def test_every_store_has_three_seals_each_anchored_once(
    played: Played, published: dict[str, list[Record]]
) -> None:
    for service in SERVICES:
        seals = seal_rows(played.rows()[service])
        assert len(seals) == 3
        anchors = [decode(SEALS, r.value or b"") for r in published[service]]
        assert [a.seal for a in anchors if isinstance(a, SealAnchored)] == [1, 2, 3]
        assert {r.key for r in published[service]} == {service.encode()}


def test_an_anchor_published_again_is_the_same_record(
    played: Played, published: dict[str, list[Record]], keys: tuple[dict[str, Signer], Any]
) -> None:
    """After a relay crash the seal is published again: same value, same signature."""
    again = relay_anchors(played.system.apps["shoe"], "shoe", keys[0]["shoe"])
    assert again == published["shoe"]


def test_an_untampered_store_matches_its_anchors(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    report = _audit(played.rows(), read(keys[1], _all(published)))
    assert report.findings == []
    assert report.anchors is not None
    dealing = report.anchors["dealing"]
    assert (dealing.anchors, dealing.matched, dealing.head_seal) == (3, 3, 3)
    assert dealing.head_digest == report.seals["dealing"].head_digest
    assert "anchored head seal 3" in to_text(report)
    shown = json.loads(to_json(report))["anchors"]
    assert shown["stores"]["dealing"]["head_digest"] == dealing.head_digest


def test_without_anchors_the_report_is_as_before(played: Played) -> None:
    report = _audit(played.rows(), None)
    assert "anchors" not in json.loads(to_json(report))
    assert "Anchors" not in to_text(report)


def test_an_edited_row_with_the_chain_recomputed_is_found(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    rows = played.rows()
    dealing = rows["dealing"]
    first_seal = seal_rows(dealing)[0]
    i = next(
        i
        for i, row in enumerate(dealing)
        if row.topic.endswith("Table.Opened") and row.notification_id < first_seal.notification_id
    )

    def renamed(state: dict[str, Any]) -> None:
        state["paytable"] = "tie-9-to-1"

    dealing[i] = edit_state(dealing[i], renamed)
    rows["dealing"] = reseal(dealing)
    hidden = _audit({"dealing": rows["dealing"]}, None)
    assert not codes(hidden) & SEAL_CODES  # the recomputed chain hides the edit from itself
    report = _audit({"dealing": rows["dealing"]}, read(keys[1], _all(published)))
    mismatches = only(report, Code.ANCHOR_DIGEST_MISMATCH)
    assert mismatches and all(f.severity is Severity.ERROR for f in mismatches)
    assert mismatches[0].notification_id == first_seal.notification_id
    assert "seal 1 is not the seal anchored" in mismatches[0].message
    assert "2 later anchored seals differ" in mismatches[1].message


def test_truncation_at_a_seal_boundary_is_found(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    shoe = played.rows()["shoe"]
    boundary = seal_rows(shoe)[1].notification_id  # keep seals 1 and 2 and what they cover
    kept = [row for row in shoe if row.notification_id <= boundary]
    hidden = _audit({"shoe": kept}, None)
    assert not codes(hidden) & SEAL_CODES  # a clean chain, only shorter
    report = _audit({"shoe": kept}, read(keys[1], _all(published)))
    (missing,) = only(report, Code.ANCHOR_MISSING_IN_STORE)
    assert missing.severity is Severity.ERROR and missing.store == "shoe"
    assert "anchored seal 3 is not in the store" in missing.message
    assert "the store's last seal is 2" in missing.message and "truncated" in missing.message


def test_deleted_last_seals_are_found(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    settlement = played.rows()["settlement"]
    last_two = {row.notification_id for row in seal_rows(settlement)[1:]}
    kept = [row for row in settlement if row.notification_id not in last_two]
    report = _audit({"settlement": kept}, read(keys[1], _all(published)))
    (missing,) = only(report, Code.ANCHOR_MISSING_IN_STORE)
    assert "anchored seals 2..3 are not in the store" in missing.message
    assert missing.severity is Severity.ERROR


def test_an_anchor_forged_without_the_key_is_refused_and_not_believed(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    made, keyring = keys
    rows = played.rows()
    original = published["shoe"][2]
    forged_value = json.dumps(
        {**json.loads(original.value or b""), "digest": "0" * 64}, separators=(",", ":")
    ).encode()
    impostor, _ = signers(["shoe"])  # a key the keyring does not give to shoe
    position = dict(original.headers)
    nid = int(position["pb-notification-id"])
    sig_by_impostor = impostor["shoe"].sign(SEALS_0, b"shoe", forged_value, nid, 0)
    sig_by_dealing = made["dealing"].sign(SEALS_0, b"shoe", forged_value, nid, 0)
    copied_to_dealing = Record(b"dealing", original.value, original.headers)
    unsigned = [(k, v) for k, v in original.headers if k != "pb-sig"]
    forgeries = [
        Record(b"shoe", forged_value, _with_sig(original.headers, sig_by_impostor)),
        Record(b"shoe", forged_value, _with_sig(original.headers, sig_by_dealing)),
        Record(b"shoe", forged_value, unsigned),
        copied_to_dealing,
    ]
    report = _audit(rows, read(keyring, [*_all(published), *forgeries]))
    bad = only(report, Code.ANCHOR_BAD_SIGNATURE)
    assert len(bad) == 3 and len(only(report, Code.ANCHOR_UNSIGNED)) == 1
    assert "bad signature" in bad[0].message
    assert "belongs to dealing" in bad[1].message
    assert not only(report, Code.ANCHOR_DIGEST_MISMATCH)  # nothing forged was believed
    assert report.anchors is not None and report.anchors["shoe"].matched == 3


def _with_sig(headers: list[tuple[str, bytes]], signature: bytes) -> list[tuple[str, bytes]]:
    return [(k, v) for k, v in headers if k != "pb-sig"] + [("pb-sig", signature)]


def test_a_replayed_old_anchor_changes_nothing(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    replayed = [*_all(published), published["dealing"][0], published["dealing"][1]]
    report = _audit(played.rows(), read(keys[1], replayed))
    assert report.findings == []
    assert report.anchors is not None and report.anchors["dealing"].head_seal == 3


def test_a_chain_rewritten_and_anchored_again_is_found(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    made, keyring = keys
    original = published["dealing"][1]
    rewritten = json.dumps(
        {**json.loads(original.value or b""), "digest": "1" * 64}, separators=(",", ":")
    ).encode()
    nid = int(dict(original.headers)["pb-notification-id"])
    again = Record(
        b"dealing",
        rewritten,
        _with_sig(original.headers, made["dealing"].sign(SEALS_0, b"dealing", rewritten, nid, 0)),
    )
    report = _audit(played.rows(), read(keyring, [*_all(published), again]))
    (conflict,) = only(report, Code.ANCHOR_DIGEST_MISMATCH)
    assert "two signed anchors of seal 2 differ" in conflict.message


def test_a_lost_anchor_between_others_is_a_warning(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    shoe = published["shoe"]
    others = published["dealing"] + published["settlement"]
    report = _audit(played.rows(), read(keys[1], [shoe[0], shoe[2], *others]))
    (gap,) = report.findings
    assert (gap.code, gap.severity, gap.store) == (Code.SEAL_NOT_ANCHORED, Severity.WARNING, "shoe")
    assert "seal 2 was never anchored" in gap.message


def test_seals_before_the_first_and_after_the_last_anchor_are_counted_not_reported(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    only_middle = [published[s][1] for s in SERVICES]  # anchoring began late, relay lagging
    report = _audit(played.rows(), read(keys[1], only_middle))
    assert report.findings == []
    assert report.anchors is not None
    assert {s: a.before_anchoring for s, a in report.anchors.items()} == dict.fromkeys(SERVICES, 1)
    assert {s: a.not_anchored_yet for s, a in report.anchors.items()} == dict.fromkeys(SERVICES, 1)


def test_a_store_with_no_anchor_at_all_is_a_warning(played: Played, keys: tuple[Any, Any]) -> None:
    report = _audit({"dealing": played.rows()["dealing"]}, read(keys[1], []))
    (warning,) = report.findings
    assert (warning.code, warning.severity) == (Code.SEAL_NOT_ANCHORED, Severity.WARNING)
    assert "none of the store's 3 seals is anchored" in warning.message


def test_an_anchor_copied_to_another_partition_prefix_or_cluster_is_refused(
    played: Played, published: dict[str, list[Record]], keys: tuple[Any, Any]
) -> None:
    """Signed for partition 0 of punto-banco.seals on this cluster: read anywhere else (a copy
    from another deployment or cluster sharing the keys), no anchor is believed."""
    records = _all(published)
    for found in (
        AnchorRecords("punto-banco.seals", keys[1], "another-cluster"),
        AnchorRecords("staging.punto-banco.seals", keys[1]),
    ):
        for offset, record in enumerate(records):
            found.add(record.key, record.value, record.headers, 0, offset)
        assert found.refused == len(records) and not found.books
    moved = AnchorRecords("punto-banco.seals", keys[1])
    moved.add(records[0].key, records[0].value, records[0].headers, 1, 0)
    assert moved.refused == 1 and "signed for partition 0, not 1" in moved.findings[0].message


def test_an_anchor_signed_with_the_first_scheme_still_verifies(
    played: Played, published: dict[str, list[Record]]
) -> None:
    """Anchors are kept forever: one a relay signed before record-jws/v2 (the logical topic,
    no partition, prefix or cluster) is still believed, and still refused when changed."""
    key = Ed25519PrivateKey.generate()
    keyring = Keyring({"shoe-1": KeyringEntry("shoe-1", "shoe", key.public_key())})
    original = published["shoe"][0]
    nid = int(dict(original.headers)["pb-notification-id"])
    header = json.dumps(
        {
            "alg": "EdDSA",
            "b64": False,
            "crit": ["b64"],
            "kid": "shoe-1",
            "pb-key": "shoe",
            "pb-pos": f"{nid}:0",
            "pb-topic": SEALS,
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    encoded = b64url(header)
    value = original.value or b""
    v1 = encoded + b".." + b64url(key.sign(encoded + b"." + value))
    found = read(keyring, [Record(b"shoe", value, _with_sig(original.headers, v1))])
    assert found.refused == 0 and list(found.book("shoe").anchors) == [1]
    changed = value.replace(b'"seal":1', b'"seal":9')
    refused = read(keyring, [Record(b"shoe", changed, _with_sig(original.headers, v1))])
    assert refused.refused == 1 and "bad signature" in refused.findings[0].message
