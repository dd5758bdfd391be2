"""The consumer believes what the writer signed: forged, unsigned, wrong-owner and misplaced
records are dead letters (``signature: ...``) and never a position; genuine ones are handled.

The harness is test_platform_consumer's (fake Kafka; dealing owns table-events). Keys are the
fixed test keys of keys_fakes.py.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

from aiokafka import TopicPartition

from contracts import BET_COMMANDS, TABLE_EVENTS, CloseBook, CommandRejected, PlaceBet, encode
from services.dev.bench.settle_in_process import open_book
from services.shared.platform.security.signing import (
    Keyring,
    KeyringEntry,
    Signer,
    Where,
    b64url,
    b64url_decode,
)
from services.shared.platform.store.incidents import IncidentLog
from services.tools.admin.keys import keyring_json
from tests.unit.platform.keys_fakes import SIGNERS, fixed_key, signature
from tests.unit.platform.test_platform_consumer import (
    CLUSTER,
    EVENTS,
    RELAYED,
    Harness,
    close,
    closed,
    event,
    record,
    relayed,
)

BETS = "p." + BET_COMMANDS


def signed_by(
    service: str,
    value: bytes,
    notification: int,
    index: int = 0,
    *,
    topic: str = EVENTS,
    partition: int = 0,
    cluster: str = CLUSTER,
    key: bytes = b"t1",
    signed_at: tuple[int, int] | None = None,
) -> list[tuple[str, bytes | None]]:
    """dealing's relay headers for the position, and ``service``'s signature of the record
    (as if it were in ``topic`` (a Kafka topic), ``partition`` of ``cluster`` with ``key`` at
    ``signed_at``, when they are given)."""
    at = signed_at or (notification, index)
    where = Where(cluster, topic, partition)
    return [*relayed(notification, index), signature(service, where, key, value, *at)]


def forged_event(
    offset: int, headers: list[tuple[str, bytes | None]], reason: str = "50"
) -> object:
    return record(offset, closed(reason), headers, topic=EVENTS, signed=False)


# ---- owned topics ------------------------------------------------------------------------


async def test_a_far_ahead_position_without_a_signature_is_a_dead_letter_never_a_position() -> None:
    """The table freeze: 8000000000000 taken as dealing's position made every genuine later
    message of the partition a duplicate."""
    h = Harness()
    await h.feed(event(0, "1", 5))
    await h.feed(forged_event(1, relayed(8_000_000_000_000)), event(2, "2", 6))
    assert h.total == 3  # dealing's next message is handled
    assert h.app.tracked_position(RELAYED) == 6 * 2**20
    [letter] = h.dead_letters()
    assert letter.offset == 1
    assert letter.error.startswith("signature: no pb-sig header"), letter.error
    assert h.kafka.committed == {TopicPartition(EVENTS, 0): 3}


async def test_records_signed_wrongly_are_dead_letters_and_genuine_ones_are_handled() -> None:
    h = Harness()
    value = closed("50")
    stranger = Signer("dealing-9", "dealing", fixed_key("mallory"))
    strangers = stranger.sign(Where(CLUSTER, EVENTS, 0), b"t1", value, 9, 0)
    genuine = signed_by("dealing", value, 9)
    header = genuine[-1][1]
    assert header is not None
    encoded, _, signature_text = header.decode().split(".")
    flipped = bytearray(b64url_decode(signature_text))
    flipped[0] ^= 1
    forged: dict[str, list[tuple[str, bytes | None]]] = {
        "no pb-sig header": relayed(9),
        "belongs to shoe": signed_by("shoe", value, 9),  # another service's key
        "unknown key id 'dealing-9'": [*relayed(9), ("pb-sig", strangers)],
        "signed for position '8:0', not 9:0": signed_by("dealing", value, 9, signed_at=(8, 0)),
        "signed for position '9:1', not 9:0": signed_by("dealing", value, 9, signed_at=(9, 1)),
        "signed for topic": signed_by("dealing", value, 9, topic="p.punto-banco.shoe-events"),
        "signed for topic 'q.": signed_by("dealing", value, 9, topic="q." + TABLE_EVENTS),
        "signed for partition 1, not 0": signed_by("dealing", value, 9, partition=1),
        "signed for cluster 'cluster-B'": signed_by("dealing", value, 9, cluster="cluster-B"),
        "signed for key 't2'": signed_by("dealing", value, 9, key=b"t2"),
        "bad signature": [
            *relayed(9),
            ("pb-sig", f"{encoded}..{b64url(bytes(flipped)).decode()}".encode()),
        ],
        "malformed": [*relayed(9), ("pb-sig", b"not a jws")],
        "nested too deeply": [*relayed(9), ("pb-sig", b"%s.." % b64url(b"[" * 1500 + b"]" * 1500))],
        "carries a payload": [*relayed(9), ("pb-sig", header.replace(b"..", b".e30."))],
        "appears more than once": [*genuine, genuine[-1]],
        "no pb-sig header (": [*relayed(9), ("pb-sig", None)],  # a header without a value
    }
    await h.feed(*[forged_event(i, headers) for i, headers in enumerate(forged.values())])
    # the value changed after signing: the genuine signature of "50" on "5000"
    tampered = record(len(forged), closed("5000"), genuine, topic=EVENTS, signed=False)
    await h.feed(tampered)
    assert h.total == 0 and h.calls == 0
    assert h.app.tracked_position(RELAYED) == 0  # no position came from any of them
    letters = h.dead_letters()
    assert [d.offset for d in letters] == list(range(len(forged) + 1))
    for (why, _), letter in zip([*forged.items(), ("bad signature", None)], letters, strict=True):
        assert letter.error.startswith("signature: "), letter.error
        assert why in letter.error, (why, letter.error)
    # The genuine record at the same position is taken.
    await h.feed(record(20, value, genuine, topic=EVENTS, signed=False))
    assert h.total == 50 and h.app.tracked_position(RELAYED) == 9 * 2**20


async def test_a_signed_record_replayed_is_a_duplicate_and_its_copy_elsewhere_is_refused() -> None:
    h = Harness()
    value = closed("5")
    genuine = signed_by("dealing", value, 3)
    await h.feed(record(0, value, genuine, topic=EVENTS, signed=False))
    await h.feed(record(1, value, genuine, topic=EVENTS, signed=False))
    assert h.total == 5 and h.runtime.stats.duplicates == 1
    # The same record moved past dealing's last position: the signature names 3:0.
    moved = [*relayed(4), genuine[-1]]
    await h.feed(record(2, value, moved, topic=EVENTS, signed=False))
    assert h.total == 5
    [letter] = h.dead_letters()
    assert "signed for position '3:0', not 4:0" in letter.error


async def test_a_key_added_to_the_keyring_file_is_taken_without_a_restart(tmp_path: Path) -> None:
    """Rotation: readers look at the keyring file again when they meet an unknown key id."""
    path = tmp_path / "keyring.json"
    first = SIGNERS["dealing"]
    path.write_text(
        keyring_json(Keyring({first.kid: KeyringEntry(first.kid, "dealing", first.public_key)}))
    )
    h = Harness()
    h.runtime.intake.keyring = Keyring.load(path)
    h.runtime.intake.keyring._checked = 0.0  # its first look at the file is due
    rotated = Signer("dealing-2", "dealing", fixed_key("pb-test-dealing-2"))
    value = closed("7")
    signed = rotated.sign(Where(CLUSTER, EVENTS, 0), b"t1", value, 2, 0)
    headers = [*relayed(2), ("pb-sig", signed)]
    await h.feed(event(0, "1", 1), record(1, value, headers, topic=EVENTS, signed=False))
    assert h.total == 1 and "unknown key id 'dealing-2'" in h.dead_letters()[0].error
    document = json.loads(path.read_text())
    document.update(
        json.loads(
            keyring_json(
                Keyring({rotated.kid: KeyringEntry(rotated.kid, "dealing", rotated.public_key)})
            )
        )
    )
    path.write_text(json.dumps(document))
    h.runtime.intake.keyring._checked = 0.0
    await h.feed(record(2, value, headers, topic=EVENTS, signed=False))
    assert h.total == 8  # the old key still verifies, the new one is known now
    await h.feed(event(3, "1", 3))
    assert h.total == 9


# ---- dealing's marks on bet-commands -----------------------------------------------------


def mark(coup: str = "c1") -> bytes:
    closes_at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC) + timedelta(minutes=1)
    return encode(open_book("t1", coup, "t1.shoe-1", closes_at))


def bet(bet_id: str) -> bytes:
    return encode(
        PlaceBet(
            table_id="t1",
            bet_id=bet_id,
            coup_id="c1",
            bettor_id="b",
            bet_type="player",
            amount=100,
            currency="EUR",
        )
    )


async def test_marks_need_dealing_s_signature_and_bets_need_none() -> None:
    h = Harness()
    opened, closing = mark(), encode(CloseBook(table_id="t1", coup_id="c1"))
    await h.feed(
        record(0, opened, topic=BETS),  # a gateway's OpenBook
        record(1, opened, signed_by("settlement", opened, 7, topic=BETS), topic=BETS),
        record(2, opened, signed_by("dealing", opened, 7), topic=BETS),  # for table-events
        record(3, closing, [*relayed(7, 1)], topic=BETS),  # dealing's headers, no signature
        record(
            4, opened, [signature("dealing", Where(CLUSTER, BETS, 0), b"t1", opened, 7)], topic=BETS
        ),
        record(5, bet("b1"), topic=BETS),  # a bet: nobody signs it
        record(6, opened, signed_by("dealing", opened, 7, topic=BETS), topic=BETS),
        record(7, closing, signed_by("dealing", closing, 7, 1, topic=BETS), topic=BETS),
    )
    assert [d.offset for d in h.marks] == [6, 7]
    assert all(d.source == "dealing" and not d.external for d in h.marks)
    assert h.total == 1  # the bet
    letters = h.dead_letters()
    assert [d.offset for d in letters] == [0, 1, 2, 3, 4]
    errors = [d.error for d in letters]
    assert errors[0].startswith("signature: its relay position cannot be read"), errors[0]
    assert "belongs to settlement, but only dealing writes here" in errors[1]
    assert "signed for topic 'p.punto-banco.table-events'" in errors[2]
    assert "no pb-sig header" in errors[3]
    assert "relay position cannot be read: header pb-source is missing" in errors[4]
    assert h.app.tracked_position(f"cluster-A:{BETS}:id-A:0") == 8  # offsets go on


async def test_a_signed_mark_that_fails_stops_its_partition_and_a_failing_bet_does_not() -> None:
    """Dealing's signature vouches for a mark: like a message on an owned topic, its failure
    stops the partition (retried until taken) instead of being dead-lettered and lost."""
    h = Harness()
    h.runtime.stops.first_delay = 60.0

    def fail(deliveries: object, tracking: object) -> None:
        raise RuntimeError("the book is not ready")

    h.runtime.subscriptions[BET_COMMANDS] = type(h.runtime.subscriptions[BET_COMMANDS])(
        BET_COMMANDS, fail
    )
    opened = mark()
    await h.feed(record(0, bet("b1"), topic=BETS))
    [letter] = h.dead_letters()
    assert letter.error.startswith("handler failed")  # a bet from outside: dead-lettered
    await h.feed(record(1, opened, signed_by("dealing", opened, 7, topic=BETS), topic=BETS))
    [stopped] = list(h.runtime.stops)
    assert (stopped.offset, stopped.message_type) == (1, "OpenBook")
    assert len(h.dead_letters()) == 1  # the mark is not dead-lettered
    assert h.kafka.committed[TopicPartition(BETS, 0)] == 1


# ---- a table's history is one partition ---------------------------------------------------


def incidents(h: Harness) -> list[tuple[str, str]]:
    """(code, table id) of each incident the harness's app recorded."""
    found = []
    for notification in h.app.recorder.select_notifications(1, 1000):
        event = h.app.mapper.to_domain_event(notification)
        if isinstance(event, IncidentLog.Raised):
            found.append((event.code, event.table_id))
    return found


async def test_a_record_not_keyed_by_its_table_or_in_another_partition_is_refused() -> None:
    """t1 belongs in partition 1 of 2 (murmur2): a genuine signature for partition 0 or a
    command there is delivered with its refusal (an incident here, never handled) and takes
    its position; the partition goes on."""
    h = Harness(partitions=2)
    value = closed("5")  # t1's
    await h.feed(record(0, value, relayed(4), topic=EVENTS))  # signed for partition 0
    await h.feed(record(0, close("7")), record(1, close("1", "t2")))  # t2 belongs in 0
    assert h.calls == 1 and h.total == 1
    assert incidents(h) == [("WRONG_PARTITION", "t1"), ("WRONG_PARTITION", "t1")]
    assert h.app.tracked_position(RELAYED) == 4 * 2**20  # its position is taken
    assert not h.dead_letters()
    misnamed = dataclasses.replace(record(2, close("3", "t2")), key=b"t2 ")
    await h.feed(misnamed)
    assert incidents(h)[-1] == ("WRONG_KEY", "t2") and h.total == 1


async def test_a_command_rejected_is_taken_in_the_partition_its_command_was_read_from() -> None:
    """A cell answers a command read in its partition there, whatever the table: a
    CommandRejected is checked for its key, not its partition."""
    h = Harness(partitions=2)
    rejected = encode(
        CommandRejected(
            table_id="t1",
            command_id=uuid4(),
            command_type="OpenTable",
            reason_code="WRONG_PARTITION",
            message="not here",
        )
    )
    await h.feed(record(0, rejected, relayed(4), topic=EVENTS))
    assert h.calls == 1 and incidents(h) == []
