"""A void is a supervisor's signed decision: dealing verifies it before anything changes.

Every refusal is answered with ``CommandRejected`` and its own reason code, and nothing else
happens: the coup keeps its phase, no other message is published. A decision is good for one
command (replay), for its own table, coup, reason and supervisor, while its key is in the
keyring and not retired, between its ``iat`` and ``exp``, and for a coup younger than the
void window.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from contracts import BettingOpened, CommandRejected, CoupVoided, Message, VoidCoup
from services.dealing.application import DealingApplication
from services.dealing.domain import CoupPhase, coup_aggregate_id
from services.shared.platform.security import (
    SupervisorKey,
    SupervisorKeyring,
)
from services.shared.platform.security import signing as keyring_module
from services.tools.admin.supervisors import (
    SupervisorSigner,
    add_supervisor_key,
    entry_json,
    sign_decision,
)
from tests.supervisors import SUPERVISOR, keyring, supervisor
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order

POPO = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


class Clock:
    """Dealing's clock, moved by the tests (real time plus an offset)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def make_driver(
    ring: SupervisorKeyring | None = None,
    clock: Clock | None = None,
    env: dict[str, str] | None = None,
) -> Driver:
    app = DealingApplication(
        env={**POPO, **(env or {})},
        clock=clock,
        supervisors=keyring() if ring is None and env is None else ring,
    )
    driver = Driver(app, ScriptedShoe([shuffled_order(1, seed=s) for s in range(5)]))
    app.handle(open_table(betting_window_ms=60_000))
    driver.pump()
    return driver


@pytest.fixture
def driver() -> Driver:
    return make_driver()


def current_coup(driver: Driver) -> str:
    return driver.of_type(BettingOpened)[-1].coup_id


def refused(driver: Driver, command: VoidCoup, code: str) -> CommandRejected:
    """Handle ``command``; it must be refused with ``code`` and change nothing else."""
    before = len(driver.published)
    phase = driver.app.get_coup(command.table_id, command.coup_id)
    phase_before = None if phase is None else phase.phase
    driver.app.handle(command)
    new = driver.pump()
    assert [type(m).__name__ for m in new] == ["CommandRejected"], new
    [rejection] = new
    assert isinstance(rejection, CommandRejected)
    assert (rejection.reason_code, rejection.command_id) == (code, command.event_id), rejection
    assert rejection.message
    after = driver.app.get_coup(command.table_id, command.coup_id)
    assert (None if after is None else after.phase) == phase_before
    assert len(driver.published) == before + 1
    return rejection


def stranger() -> SupervisorSigner:
    """A supervisor whose key the keyring does not hold."""
    return SupervisorSigner("ghost-1", "ghost", Ed25519PrivateKey.generate())


def resigned(command: VoidCoup, **claims: object) -> VoidCoup:
    """``command`` with its token's claims changed and its signature kept (tampering)."""
    assert command.authorization is not None
    header, payload, signature = command.authorization.split(".")
    document = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    document.update(claims)
    encoded = base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()
    return command.model_copy(update={"authorization": f"{header}.{encoded}.{signature}"})


def token_of(header: dict[str, object], claims: dict[str, object]) -> str:
    def part(document: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}.c2lnbmF0dXJl"


# -- accepted ------------------------------------------------------------------------------
def test_a_signed_void_voids_and_keeps_its_token_in_the_store(driver: Driver) -> None:
    coup_id = current_coup(driver)
    void = supervisor().void("t1", coup_id, "dealer exposed a card")
    driver.app.handle(void)
    driver.pump()
    [voided] = driver.of_type(CoupVoided)
    assert (voided.supervisor_id, voided.reason) == (SUPERVISOR, "dealer exposed a card")
    coup = driver.app.get_coup("t1", coup_id)
    assert coup is not None and coup.phase is CoupPhase.VOIDED
    assert coup.void_authorization == void.authorization
    [row] = [
        r
        for r in driver.app.recorder.select_events(coup_aggregate_id("t1", coup_id))
        if r.topic.endswith(":Coup.Voided")
    ]
    stored = json.loads(row.state)
    assert (stored["class_version"], stored["authorization"]) == (2, void.authorization)
    assert stored["supervisor_id"] == SUPERVISOR


def test_the_supervisor_id_comes_from_the_token_and_may_be_left_out(driver: Driver) -> None:
    void = supervisor().void("t1", current_coup(driver), "misdeal")
    driver.app.handle(void.model_copy(update={"supervisor_id": None}))
    driver.pump()
    assert [m.supervisor_id for m in driver.of_type(CoupVoided)] == [SUPERVISOR]


# -- refused -------------------------------------------------------------------------------
def _lifetime_too_long(coup: str) -> VoidCoup:
    return supervisor().void("t1", coup, lifetime=timedelta(hours=2))


def _unsigned_alg_none(coup: str) -> VoidCoup:
    void = supervisor().void("t1", coup)
    assert void.authorization is not None
    claims = void.authorization.split(".")[1]
    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"pb-decision+jwt","kid":"x-1"}')
    token = f"{header.rstrip(b'=').decode()}.{claims}.c2ln"
    return void.model_copy(update={"authorization": token})


def _another_supervisors_name(coup: str) -> VoidCoup:
    """sup-7's key, signing a decision in another supervisor's name."""
    own = supervisor()
    event_id = uuid4()
    token = sign_decision(
        own.key,
        own.kid,
        supervisor_id="sup-8",
        decision_id=event_id,
        table_id="t1",
        coup_id=coup,
        reason="",
    )
    return VoidCoup(event_id=event_id, table_id="t1", coup_id=coup, authorization=token)


def _signed_by_another_key_under_a_known_id(coup: str) -> VoidCoup:
    own = supervisor()
    return SupervisorSigner(own.kid, own.supervisor_id, Ed25519PrivateKey.generate()).void(
        "t1", coup
    )


REFUSALS: list[tuple[str, Callable[[str], VoidCoup], str]] = [
    ("no authorization", lambda c: VoidCoup(table_id="t1", coup_id=c), "SUPERVISOR_REQUIRED"),
    (
        "no authorization, a supervisor named",
        lambda c: VoidCoup(table_id="t1", coup_id=c, supervisor_id=SUPERVISOR),
        "SUPERVISOR_REQUIRED",
    ),
    (
        "not a token",
        lambda c: VoidCoup(table_id="t1", coup_id=c, authorization="abc.def.ghi"),
        "AUTHORIZATION_MALFORMED",
    ),
    ("alg none", _unsigned_alg_none, "AUTHORIZATION_MALFORMED"),
    ("a lifetime above an hour", _lifetime_too_long, "AUTHORIZATION_MALFORMED"),
    (
        "a JWT of another type",
        lambda c: VoidCoup(
            table_id="t1",
            coup_id=c,
            authorization=token_of({"alg": "EdDSA", "kid": "sup-7-1", "typ": "JWT"}, {}),
        ),
        "AUTHORIZATION_MALFORMED",
    ),
    ("an unknown key", lambda c: stranger().void("t1", c), "UNKNOWN_SUPERVISOR_KEY"),
    ("another key, a known id", _signed_by_another_key_under_a_known_id, "BAD_SIGNATURE"),
    (
        "a tampered reason",
        lambda c: resigned(supervisor().void("t1", c, "misdeal"), reason="x").model_copy(
            update={"reason": "x"}
        ),
        "BAD_SIGNATURE",
    ),
    (
        "expired",
        lambda c: supervisor().void(
            "t1", c, issued_at=datetime.now(UTC) - timedelta(hours=1), lifetime=timedelta(minutes=5)
        ),
        "AUTHORIZATION_EXPIRED",
    ),
    (
        "issued in the future",
        lambda c: supervisor().void("t1", c, issued_at=datetime.now(UTC) + timedelta(minutes=10)),
        "AUTHORIZATION_EXPIRED",
    ),
    (
        "signed for another coup",
        lambda c: supervisor().void("t1", "t1.coup-9").model_copy(update={"coup_id": c}),
        "AUTHORIZATION_MISMATCH",
    ),
    (
        "signed for another table",
        lambda c: supervisor().void("t2", c).model_copy(update={"table_id": "t1"}),
        "AUTHORIZATION_MISMATCH",
    ),
    (
        "another reason than it signs",
        lambda c: supervisor().void("t1", c, "misdeal").model_copy(update={"reason": "other"}),
        "AUTHORIZATION_MISMATCH",
    ),
    (
        "another command's token",
        lambda c: supervisor().void("t1", c).model_copy(update={"event_id": uuid4()}),
        "AUTHORIZATION_MISMATCH",
    ),
    (
        "another supervisor named than signed",
        lambda c: supervisor().void("t1", c).model_copy(update={"supervisor_id": "sup-8"}),
        "AUTHORIZATION_MISMATCH",
    ),
    ("in another supervisor's name", _another_supervisors_name, "AUTHORIZATION_MISMATCH"),
]


@pytest.mark.parametrize(
    ("make", "code"), [(make, code) for _, make, code in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_void_without_a_valid_decision_is_refused_and_changes_nothing(
    driver: Driver, make: Callable[[str], VoidCoup], code: str
) -> None:
    refused(driver, make(current_coup(driver)), code)


def test_every_refusal_code_is_a_contract_code() -> None:
    from typing import get_args

    from contracts import CommandRejectionCode

    assert {code for _, _, code in REFUSALS} | {
        "AUTHORIZATION_REPLAYED",
        "SUPERVISOR_KEY_RETIRED",
        "VOID_WINDOW_PASSED",
        "COUP_NOT_VOIDABLE",
    } <= set(get_args(CommandRejectionCode))


def test_the_signature_is_checked_before_the_table_is_looked_up(driver: Driver) -> None:
    """A forger learns nothing about which tables and coups exist."""
    refused(driver, stranger().void("t9", "t9.coup-1"), "UNKNOWN_SUPERVISOR_KEY")


# -- replay --------------------------------------------------------------------------------
def test_a_replayed_void_is_refused_and_the_coup_stays_voided_once(driver: Driver) -> None:
    coup_id = current_coup(driver)
    void = supervisor().void("t1", coup_id, "misdeal")
    driver.app.handle(void)
    driver.pump()
    refused(driver, void, "AUTHORIZATION_REPLAYED")
    assert len(driver.of_type(CoupVoided)) == 1


def test_a_decision_refused_once_stays_spent_when_its_coup_appears(driver: Driver) -> None:
    """A void signed ahead for the next coup is refused (no such coup); sent again once that
    coup is in play, it changes nothing: its id was used."""
    coup_id = current_coup(driver)
    ahead = supervisor().void("t1", "t1.coup-2", "signed ahead")
    refused(driver, ahead, "NO_SUCH_COUP")
    driver.close_betting_and_pump()
    assert current_coup(driver) == "t1.coup-2" != coup_id
    before = len(driver.published)
    driver.app.handle(ahead)
    assert driver.pump() == [] and len(driver.published) == before
    coup = driver.app.get_coup("t1", "t1.coup-2")
    assert coup is not None and coup.phase is CoupPhase.BETTING


def test_another_decision_on_a_voided_coup_is_refused(driver: Driver) -> None:
    coup_id = current_coup(driver)
    driver.app.handle(supervisor().void("t1", coup_id, "first"))
    driver.pump()
    refused(driver, supervisor().void("t1", coup_id, "second"), "COUP_NOT_VOIDABLE")


# -- the void window -----------------------------------------------------------------------
def test_a_coup_older_than_the_void_window_cannot_be_voided() -> None:
    clock = Clock()
    driver = make_driver(clock=clock)
    coup_id = current_coup(driver)
    clock.offset = timedelta(hours=24, minutes=1)  # the default window is 24 hours
    later = datetime.now(UTC) + clock.offset
    rejection = refused(
        driver, supervisor().void("t1", coup_id, issued_at=later), "VOID_WINDOW_PASSED"
    )
    assert "24 hours" in rejection.message
    clock.offset = timedelta(hours=23, minutes=58)
    driver.app.handle(supervisor().void("t1", coup_id, issued_at=datetime.now(UTC) + clock.offset))
    driver.pump()
    assert [m.coup_id for m in driver.of_type(CoupVoided)] == [coup_id]


def test_the_keyring_and_the_void_window_come_from_the_environment(tmp_path: Path) -> None:
    signer = supervisor()
    ring = tmp_path / "supervisors.json"
    ring.write_text(entry_json(keyring().entries()), encoding="utf-8")
    clock = Clock()
    env = {"PB_SUPERVISOR_KEYRING": str(ring), "PB_VOID_WINDOW": "1m"}
    driver = make_driver(clock=clock, env=env)
    assert driver.app.voids.window == timedelta(seconds=60)
    coup_id = current_coup(driver)
    clock.offset = timedelta(seconds=90)
    refused(
        driver,
        signer.void("t1", coup_id, issued_at=datetime.now(UTC) + clock.offset),
        "VOID_WINDOW_PASSED",
    )


def test_without_a_keyring_every_void_is_refused() -> None:
    driver = make_driver(ring=SupervisorKeyring({}))
    refused(driver, supervisor().void("t1", current_coup(driver)), "UNKNOWN_SUPERVISOR_KEY")


# -- rotation ------------------------------------------------------------------------------
def test_after_a_rotation_the_new_key_voids_and_the_old_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyring_module, "_RELOAD_EVERY", 0.0)
    ring_path, key_path = tmp_path / "supervisors.json", tmp_path / "sup-9.pem"
    add_supervisor_key(ring_path, key_path, "sup-9")
    ring = SupervisorKeyring.watching(ring_path)
    old = SupervisorSigner.from_file(key_path, ring)
    driver = make_driver(ring=ring)
    first = current_coup(driver)
    signed_before = old.void("t1", first, "signed before the rotation")

    new_key, retired = add_supervisor_key(ring_path, key_path, "sup-9")  # keygen again
    assert (old.kid, new_key.kid, retired) == ("sup-9-1", "sup-9-2", ["sup-9-1"])
    rejection = refused(driver, signed_before, "SUPERVISOR_KEY_RETIRED")
    assert "sup-9-1" in rejection.message
    new = SupervisorSigner.from_file(key_path, ring)
    assert new.kid == "sup-9-2"
    driver.app.handle(new.void("t1", first, "signed after"))
    driver.pump()
    assert [m.supervisor_id for m in driver.of_type(CoupVoided)] == ["sup-9"]


def test_a_supervisor_added_to_the_file_is_taken_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyring_module, "_RELOAD_EVERY", 0.0)
    ring_path = tmp_path / "supervisors.json"  # not there yet when dealing starts
    driver = make_driver(env={"PB_SUPERVISOR_KEYRING": str(ring_path)})
    coup_id = current_coup(driver)
    add_supervisor_key(ring_path, tmp_path / "sup-5.pem", "sup-5")
    signer = SupervisorSigner.from_file(tmp_path / "sup-5.pem", SupervisorKeyring.load(ring_path))
    driver.app.handle(signer.void("t1", coup_id))
    driver.pump()
    assert [m.supervisor_id for m in driver.of_type(CoupVoided)] == ["sup-5"]


def test_a_retired_key_refuses_only_what_is_signed_for_after_its_retirement() -> None:
    key = SupervisorKey("sup-1-1", "sup-1", Ed25519PrivateKey.generate().public_key())
    retired = SupervisorKey(
        key.kid, key.supervisor, key.public_key, datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert key.active_at(datetime(2030, 1, 1, tzinfo=UTC))
    assert retired.active_at(datetime(2025, 12, 31, tzinfo=UTC))
    assert not retired.active_at(datetime(2026, 1, 1, tzinfo=UTC))


def test_a_batch_with_a_void_and_its_replay_voids_once(driver: Driver) -> None:
    from eventsourcing.persistence import Tracking

    void = supervisor().void("t1", current_coup(driver), "misdeal")
    batch: list[Message] = [void, void]
    driver.app.handle_batch(batch, Tracking("ops:table-commands:0", 1))
    driver.pump()
    assert len(driver.of_type(CoupVoided)) == 1
    assert [m.reason_code for m in driver.of_type(CommandRejected)] == ["AUTHORIZATION_REPLAYED"]
