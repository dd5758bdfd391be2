"""The audit verifies every stored void's signed decision again (non-repudiation).

Against the supervisors keyring it is given: a void whose token does not verify (changed,
forged, signed by a key the keyring lacks or retired before the void was recorded) or does not
match the stored void (its reason, its supervisor) is an error; a void recorded before voids
were signed is a warning; without a keyring the CLI's audit says the voids were not verified.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.shared.platform.security import (
    SupervisorKey,
    SupervisorKeyring,
)
from services.tools.admin.supervisors import (
    SupervisorSigner,
)
from services.tools.audit.auditor import AuditReport, audit
from services.tools.audit.findings import Code, Severity
from services.tools.audit.memory_stores import ListStore
from services.tools.audit.stores import Row
from tests.unit.audit.helpers import Played, codes, edit_state, only, play_history
from tests.unit.compat.golden import SERVICES, golden_rows

VOIDED = ":Coup.Voided"


@pytest.fixture(scope="module")
def played() -> Played:
    return play_history(coups=10, tables=1, seal=False)  # seals: test_audit_tampering


def run(
    rows: dict[str, list[Row]],
    keyring: SupervisorKeyring | None,
    require: bool = True,
) -> AuditReport:
    stores = {name: ListStore(name, list(r)) for name, r in rows.items()}
    return audit(stores, supervisors=keyring, require_decisions=require)


def decision_findings(report: AuditReport) -> list[Any]:
    wanted = {Code.VOID_NOT_AUTHORIZED, Code.VOID_UNSIGNED, Code.DECISIONS_NOT_VERIFIED}
    return [f for f in report.findings if f.code in wanted]


def void_rows(rows: dict[str, list[Row]]) -> list[int]:
    return [i for i, row in enumerate(rows["dealing"]) if row.topic.endswith(VOIDED)]


def edit_void(rows: dict[str, list[Row]], change: Any, nth: int = 0) -> Row:
    i = void_rows(rows)[nth]
    rows["dealing"][i] = edit_state(rows["dealing"][i], change)
    return rows["dealing"][i]


def claims_changed(token: str, **claims: object) -> str:
    header, payload, signature = token.split(".")
    document = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    document.update(claims)
    data = json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
    return f"{header}.{base64.urlsafe_b64encode(data).rstrip(b'=').decode()}.{signature}"


def test_every_stored_void_verifies_against_the_keyring(played: Played) -> None:
    rows = played.rows()
    report = run(rows, played.system.supervisors)
    assert decision_findings(report) == []
    assert report.checked["decisions"] == len(void_rows(rows)) == len(played.logs["t1"].voided)
    assert not report.errors


def test_without_a_keyring_the_voids_are_reported_unverified(played: Played) -> None:
    report = run(played.rows(), None)
    [finding] = decision_findings(report)
    assert (finding.code, finding.severity) == (Code.DECISIONS_NOT_VERIFIED, Severity.WARNING)
    assert "--supervisors" in finding.message
    assert "decisions" not in report.checked
    assert decision_findings(run(played.rows(), None, require=False)) == []


def test_a_tampered_stored_token_is_an_error(played: Played) -> None:
    rows = played.rows()

    def tamper(state: dict[str, Any]) -> None:
        state["authorization"] = claims_changed(state["authorization"], reason="nothing wrong")
        state["reason"] = "nothing wrong"  # the row agrees with its token: the signature not

    row = edit_void(rows, tamper)
    [finding] = decision_findings(run(rows, played.system.supervisors))
    assert (finding.code, finding.severity) == (Code.VOID_NOT_AUTHORIZED, Severity.ERROR)
    assert "BAD_SIGNATURE" in finding.message
    assert (finding.store, finding.notification_id) == ("dealing", row.notification_id)
    assert finding.table_id == "t1" and finding.coup_id is not None


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("reason", "another reason", "reason"), ("supervisor_id", "sup-99", "supervisor")],
)
def test_a_stored_void_that_is_not_the_decision_signed_is_an_error(
    played: Played, field: str, value: str, said: str
) -> None:
    rows = played.rows()
    edit_void(rows, lambda state: state.update({field: value}))
    [finding] = decision_findings(run(rows, played.system.supervisors))
    assert finding.code is Code.VOID_NOT_AUTHORIZED
    assert said in finding.message


def test_a_void_signed_by_a_key_not_in_the_keyring_is_an_error(played: Played) -> None:
    rows = played.rows()
    forger = SupervisorSigner("supervisor-7-1", "supervisor-7", Ed25519PrivateKey.generate())
    other = SupervisorKeyring(
        {"supervisor-7-1": SupervisorKey("supervisor-7-1", "supervisor-7", forger.key.public_key())}
    )
    report = run(rows, other)  # the real keys are not in it: every void fails
    found = decision_findings(report)
    assert {f.code for f in found} == {Code.VOID_NOT_AUTHORIZED}
    assert len(found) == len(void_rows(rows))
    assert all("BAD_SIGNATURE" in f.message for f in found)
    unknown = run(rows, SupervisorKeyring({}))
    assert all("UNKNOWN_SUPERVISOR_KEY" in f.message for f in decision_findings(unknown))


def test_a_forged_token_in_the_store_is_an_error(played: Played) -> None:
    rows = played.rows()
    forger = SupervisorSigner("mallory-1", "mallory", Ed25519PrivateKey.generate())

    def forge(state: dict[str, Any]) -> None:
        void = forger.void(state["table_id"], state["coup_id"], state["reason"])
        state["authorization"], state["supervisor_id"] = void.authorization, "mallory"

    edit_void(rows, forge)
    [finding] = decision_findings(run(rows, played.system.supervisors))
    assert finding.code is Code.VOID_NOT_AUTHORIZED and "UNKNOWN_SUPERVISOR_KEY" in finding.message


def test_a_void_recorded_after_its_key_was_retired_is_an_error(played: Played) -> None:
    [key] = played.system.supervisors.entries()
    early = datetime.now(UTC) - timedelta(days=1)
    retired = SupervisorKeyring(
        {key.kid: SupervisorKey(key.kid, key.supervisor, key.public_key, early)}
    )
    found = decision_findings(run(played.rows(), retired))
    assert found and all("SUPERVISOR_KEY_RETIRED" in f.message for f in found)
    later = datetime.now(UTC) + timedelta(days=1)  # retired after the voids: they stand
    standing = SupervisorKeyring(
        {key.kid: SupervisorKey(key.kid, key.supervisor, key.public_key, later)}
    )
    assert decision_findings(run(played.rows(), standing)) == []


def test_a_void_stored_without_its_token_is_an_error(played: Played) -> None:
    rows = played.rows()
    edit_void(rows, lambda state: state.update(authorization=None))
    [finding] = decision_findings(run(rows, played.system.supervisors))
    assert finding.code is Code.VOID_NOT_AUTHORIZED
    assert "without the supervisor's signed decision" in finding.message


def test_a_void_recorded_before_signatures_is_a_warning(played: Played) -> None:
    rows = played.rows()

    def older(state: dict[str, Any]) -> None:  # Coup.Voided version 1: no class_version
        del state["class_version"], state["authorization"]

    edit_void(rows, older)
    [finding] = decision_findings(run(rows, played.system.supervisors))
    assert (finding.code, finding.severity) == (Code.VOID_UNSIGNED, Severity.WARNING)
    assert "before voids were signed" in finding.message


def test_the_golden_stores_voids_were_recorded_before_signatures() -> None:
    stores = {
        service: [
            Row(
                number,
                bytes.fromhex(row["originator_id"]),
                row["version"],
                row["topic"],
                row["state"].encode("utf-8"),
            )
            for number, row in enumerate(golden_rows(service), start=1)
        ]
        for service in SERVICES
    }
    report = run(stores, SupervisorKeyring({}))
    found = decision_findings(report)
    assert found and {(f.code, f.severity) for f in found} == {
        (Code.VOID_UNSIGNED, Severity.WARNING)
    }
    assert Code.VOID_NOT_AUTHORIZED not in codes(report)
    assert len(only(report, Code.VOID_UNSIGNED)) == report.checked["decisions"]
