"""Hostile bytes, end to end: forged relay headers, poison pills and values beyond every bound,
written by an attacker to the real topics while honest bettors play.

Real Kafka, the three real services as subprocesses. Every hostile record must get its designed
answer (a dead letter that says why, or the answer the contract promises), the services must
keep answering the honest bets in the same partition, the tables must keep dealing, and the
ledger must find every honest accepted bet settled once with the right amount. Generated
records (hypothesis) come in a fixed budget, the same on every run (``attacker.examples``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.errors import KafkaError
from hypothesis import strategies as st

from contracts import (
    BET_COMMANDS,
    BOOK_EVENTS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    BetAccepted,
    BetLimitSpec,
    BetRejected,
    BetsClosed,
    CloseBetting,
    CommandRejected,
    ContractError,
    CutCardReached,
    DeadLetter,
    DrawCards,
    Message,
    OpenTable,
    TableClosed,
    TableOpened,
    decode,
    encode,
)
from contracts.dead_letter import MAX_DEAD_LETTER_PAYLOAD, MAX_HEADER_CHARS
from contracts.envelope import MAX_STAKE
from services.shared.platform.consumer.intake import refused_bet
from tests.e2e.helpers import LIMITS, answers, bet, betting_opened
from tests.e2e.hostile.attacker import (
    INDEX,
    NOTIFICATION,
    SOURCE,
    Headers,
    HostileSystem,
    examples,
)
from tests.e2e.hostile.play import (
    accepted_all,
    crowd,
    crowd_goes_on,
    finish,
    honest_bets,
    last_answer,
    metric,
    place_all,
    play_coup,
    resolved,
    settled,
    table_apart,
    until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

CONSUMERS: Mapping[str, frozenset[str]] = {
    TABLE_EVENTS: frozenset({"settlement"}),
    SHOE_EVENTS: frozenset({"dealing", "settlement"}),
    BOOK_EVENTS: frozenset({"dealing"}),
    SHOE_COMMANDS: frozenset({"shoe"}),
}
"""Owned topic -> the services that read it (each dead-letters what it refuses)."""

OWNERS: Mapping[str, str] = {
    TABLE_EVENTS: "dealing",
    SHOE_EVENTS: "shoe",
    BOOK_EVENTS: "settlement",
    SHOE_COMMANDS: "dealing",
}
RELAY_NAMES = (SOURCE, NOTIFICATION, INDEX)
LARGEST_NOTIFICATION = (2**63 - 1) // 2**20
"""The largest notification id whose position (id * 2**20 + index) fits 63 bits: 8796093022207."""


# ---- records the services must refuse, or answer ----------------------------------------


def letters_for(system: HostileSystem, topic: str, partition: int, offset: int) -> list[DeadLetter]:
    """The dead letters (each once) of the record at ``topic`` (logical) partition offset."""
    found = {
        (m.service, m.offset): m
        for m in system.seen(DeadLetter)
        if m.original_topic == system.settings.topic_prefix + topic
        and (m.partition, m.offset) == (partition, offset)
    }
    return list(found.values())


@st.composite
def untrusted_headers(draw: st.DrawFn, owner: str) -> list[tuple[str, bytes | None]]:
    """Relay headers with at least one defect (missing, repeated, without a value, another
    source, a number malformed or out of range), among other headers of any kind."""
    headers: dict[str, list[bytes | None]] = {
        SOURCE: [owner.encode()],
        NOTIFICATION: [str(draw(st.integers(1, 5))).encode()],
        INDEX: [str(draw(st.integers(0, 3))).encode()],
    }
    bad_numbers = [
        str(LARGEST_NOTIFICATION + 1).encode(),  # its position needs 64 bits
        b"9" * 14,
        b"9" * 16,
        b"99999999999999999999",
        b"0",
        b"01",
        b"+1",
        b"-1",
        b" 1",
        b"1 ",
        b"1e3",
        b"0x1",
        "\u0661".encode(),  # ARABIC-INDIC DIGIT ONE: int() reads it, a relay never writes it
        b"",
        b"\xff",
    ]
    defects = draw(
        st.lists(
            st.sampled_from(["missing", "repeated", "null", "source", "id", "index"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    for defect in defects:
        name = draw(st.sampled_from(RELAY_NAMES))
        if defect == "missing":
            headers[name] = []
        elif defect == "repeated":
            headers[name] = [*headers[name], draw(st.sampled_from([*headers[name], b"2"]))]
        elif defect == "null":
            headers[name] = [None]
        elif defect == "source":
            headers[SOURCE] = [
                draw(
                    st.sampled_from([b"shoe", b"dealing", b"settlement", b"", b"x"]).filter(
                        lambda value: value != owner.encode()
                    )
                )
            ]
        elif defect == "id":
            headers[NOTIFICATION] = [draw(st.sampled_from(bad_numbers))]
        else:
            headers[INDEX] = [draw(st.sampled_from([b"1048576", b"12345678", *bad_numbers[4:]]))]
    noise = draw(
        st.lists(
            st.tuples(
                st.text(max_size=300).filter(lambda name: name not in RELAY_NAMES),
                st.one_of(st.none(), st.binary(max_size=300)),
            ),
            max_size=40,
        )
    )
    flat = [(name, value) for name, values in headers.items() for value in values]
    return draw(st.permutations(flat + noise))


ANY_HEADERS = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([*RELAY_NAMES, "pb-type"]), st.text(max_size=50)),
        st.one_of(
            st.none(),
            st.sampled_from([b"8000000000000", b"99999999999999999999", b"dealing", b"0"]),
            st.binary(max_size=100),
        ),
    ),
    max_size=300,
)
"""Headers of any kind: on the command topics they mean nothing."""


def hostile_fact(topic: str, crowd_table: str, opened: Any) -> Message:
    """A message that would hurt the crowd's table if a consumer believed it."""
    if topic == TABLE_EVENTS:
        return TableClosed(table_id=crowd_table, reason="forged")
    if topic == SHOE_EVENTS:
        return CutCardReached(
            table_id=crowd_table, shoe_id=opened.shoe_id, coup_id=opened.coup_id, position=20
        )
    if topic == BOOK_EVENTS:
        return BetsClosed(
            table_id=crowd_table, coup_id=opened.coup_id, bets=0, staked=0, currency="EUR"
        )
    return DrawCards(
        table_id=crowd_table,
        shoe_id=opened.shoe_id,
        coup_id=opened.coup_id,
        request_id=f"{opened.coup_id}.draw-1",
        count=6,
    )


@pytest.mark.timeout(180)
async def test_untrusted_relay_headers_are_dead_letters_and_command_topics_ignore_them(
    hostile: HostileSystem,
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    crowd_coup = betting_opened(hostile, crowd_table)[-1]

    # Owned topics: headers with a defect, on a fact that would hurt the crowd's table.
    refused: list[tuple[str, int, int, Headers]] = []
    named = [
        [(SOURCE, b"dealing"), (NOTIFICATION, b"99999999999999999999"), (INDEX, b"0")],
        [(SOURCE, None), (NOTIFICATION, None), (INDEX, None)],
        [(SOURCE, b"dealing"), (SOURCE, b"dealing"), (NOTIFICATION, b"5"), (INDEX, b"0")],
        [(SOURCE, b"settlement"), (NOTIFICATION, b"5"), (INDEX, b"0")],
        [
            (SOURCE, b"dealing"),
            (NOTIFICATION, str(LARGEST_NOTIFICATION + 1).encode()),
            (INDEX, b"0"),
        ],
        [(SOURCE, b"dealing"), (NOTIFICATION, b"5"), (INDEX, b"1048576")],
    ]
    generated = [
        (topic, headers)
        for topic in CONSUMERS
        for headers in examples(untrusted_headers(OWNERS[topic]), 6)
    ]
    for topic, headers in [*((TABLE_EVENTS, h) for h in named), *generated]:
        fact = hostile_fact(topic, crowd_table, crowd_coup)
        record = await hostile.attacker.forge(fact, headers=headers, topic=topic)
        refused.append((topic, record.partition, record.offset, headers))

    # Command topics: any headers at all, on honest commands that must be answered.
    noisy: list[Headers] = [
        [(SOURCE, b"dealing"), (NOTIFICATION, b"99999999999999999999"), (INDEX, b"0")],
        [(SOURCE, b"dealing"), (NOTIFICATION, b"8000000000000"), (INDEX, b"0")],
        [(SOURCE, None), (SOURCE, None), (NOTIFICATION, None), (INDEX, b"1"), (INDEX, b"1")],
        *examples(ANY_HEADERS, 10),
    ]
    honest = [bet(table, opened.coup_id, f"noisy-{i}", "tie", 100 + i) for i in range(len(noisy))]
    await accepted_all(hostile, honest_bets(table, opened.coup_id))
    for command, headers in zip(honest, noisy, strict=True):
        await hostile.attacker.send(
            BET_COMMANDS, encode(command), key=table.encode(), headers=headers
        )
    reopened = OpenTable(
        table_id=f"{table}-noisy",
        limits=LIMITS,
        currency="EUR",
        betting_window_ms=60_000,
        cut_card_from_end=14,
        decks=1,
    )
    await hostile.attacker.send(
        TABLE_COMMANDS,
        encode(reopened),
        key=reopened.table_id.encode(),
        headers=[(SOURCE, b"dealing"), (NOTIFICATION, b"8000000000000"), (INDEX, None)] * 3,
    )

    def all_letters() -> bool:
        return all(
            {m.service for m in letters_for(hostile, t, p, o)} >= CONSUMERS[t]
            for t, p, o, _ in refused
        )

    await until(hostile, all_letters, 60, "a dead letter from every reader of every forgery")
    for topic, partition, offset, headers in refused:
        for letter in letters_for(hostile, topic, partition, offset):
            assert letter.error.startswith("untrusted headers"), (headers, letter.error)
            assert len(letter.headers) <= 32 and len(letter.error) <= 2000
            assert all(len(k) <= MAX_HEADER_CHARS for k in letter.headers)
    await until(
        hostile,
        lambda: (
            all(answers(hostile, b.bet_id) for b in honest)
            and any(m.table_id == reopened.table_id for m in hostile.seen(TableOpened))
        ),
        60,
        "answers to the commands with odd headers",
    )
    for command in honest:
        assert isinstance(last_answer(hostile, command.bet_id), BetAccepted), command.bet_id
    assert not [m for m in hostile.seen(TableClosed) if m.table_id == crowd_table]

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=opened.coup_id))
    await until(hostile, lambda: settled(hostile, opened.coup_id), 60, "the coup settled")
    await play_coup(hostile, table, 2)
    await crowd_goes_on(hostile, crowd_table, 3)
    await finish(hostile, driver, [table, reopened.table_id])


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("store", "topic", "notification", "index"),
    [
        pytest.param("sqlite", TABLE_EVENTS, 8_000_000_000_000, 0, id="table-events-sqlite"),
        pytest.param(
            "postgres",
            TABLE_EVENTS,
            LARGEST_NOTIFICATION,
            2**20 - 1,  # position 2**63 - 1: the largest bigint
            id="table-events-postgres-2**63-1",
            marks=pytest.mark.postgres,
        ),
        pytest.param("sqlite", SHOE_COMMANDS, 8_000_000_000_000, 0, id="shoe-commands-sqlite"),
    ],
    indirect=["store"],
)
async def test_a_relay_position_far_ahead_freezes_no_table(
    hostile: HostileSystem, topic: str, notification: int, index: int
) -> None:
    driver, crowd_table = await crowd(hostile)
    await crowd_goes_on(hostile, crowd_table, 1)
    headers = [
        (SOURCE, OWNERS[topic].encode()),
        (NOTIFICATION, str(notification).encode()),
        (INDEX, str(index).encode()),
    ]
    record = await hostile.attacker.send(
        topic, b"not a message", key=crowd_table.encode(), headers=headers
    )
    await until(
        hostile,
        lambda: (
            {m.service for m in letters_for(hostile, topic, record.partition, record.offset)}
            >= CONSUMERS[topic]
        ),
        30,
        "the record dead-lettered",
    )
    for letter in letters_for(hostile, topic, record.partition, record.offset):
        # Well-formed headers, but not signed by the owner: never a position.
        assert letter.error.startswith("signature: no pb-sig"), letter.error
    before = len(resolved(hostile, crowd_table))
    try:
        await until(
            hostile,
            lambda: (
                len(resolved(hostile, crowd_table)) >= before + 3
                and all(
                    settled(hostile, m.coup_id) for m in resolved(hostile, crowd_table)[before:]
                )
            ),
            30,
            "3 more coups at the crowd's table, dealt and settled",
        )
    except AssertionError as stuck:
        skipped = {
            name: await metric(hostile, name, "pb_duplicates_skipped_total")
            for name in CONSUMERS[topic]
        }
        raise AssertionError(
            f"after a record with {notification}/{index} on {topic}: "
            f"{len(resolved(hostile, crowd_table)) - before} coups resolved, settled: "
            f"{[settled(hostile, m.coup_id) for m in resolved(hostile, crowd_table)[before:]]}; "
            f"duplicates skipped so far: {skipped}"
        ) from stuck
    await finish(hostile, driver)


# ---- poison pills ------------------------------------------------------------------------


def place_bet_document(table: str, coup: str, **fields: Any) -> dict[str, Any]:
    """A PlaceBet as JSON types; ``fields`` replace (or, with ``...``, remove) fields."""
    document: dict[str, Any] = {
        "type": "PlaceBet",
        "event_id": str(uuid.uuid4()),
        "occurred_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "schema_version": 1,
        "causation_id": None,
        "correlation_id": None,
        "table_id": table,
        "bet_id": f"pill-{uuid.uuid4().hex[:20]}",
        "coup_id": coup,
        "bettor_id": f"bettor-{uuid.uuid4().hex[:12]}",
        "bet_type": "tie",
        "amount": 100,
        "currency": "EUR",
    }
    for name, value in fields.items():
        if value is ...:
            document.pop(name, None)
        else:
            document[name] = value
    return document


TEXT_BOUNDS = {"bet_id": 64, "coup_id": 128, "bettor_id": 128, "bet_type": 32, "currency": 16}


@st.composite
def mutated_bet(draw: st.DrawFn) -> dict[str, Any]:
    """One PlaceBet field (or the envelope) changed to a value at, beyond or far from its
    bound, or of another JSON type, or the field removed, or one added."""
    field = draw(
        st.sampled_from(
            [
                *TEXT_BOUNDS,
                "amount",
                "schema_version",
                "event_id",
                "occurred_at",
                "type",
                "table_id",
                "extra",
                "missing",
            ]
        )
    )
    other_types = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**20), 10**20),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    )
    if field in TEXT_BOUNDS:
        bound = TEXT_BOUNDS[field]
        size = draw(st.sampled_from([1, bound - 1, bound, bound + 1, bound * 100]))
        value: Any = draw(
            st.one_of(
                st.text(min_size=1, max_size=3).map(lambda text: (text * size)[:size]),
                other_types,
            )
        )
        return {field: value}
    if field == "amount":
        edge = 2**53 - 1
        return {
            field: draw(
                st.one_of(
                    st.sampled_from([edge, edge + 1, -edge, -edge - 1, 10**30, 0, -1, MAX_STAKE]),
                    st.integers(),
                    st.sampled_from(["abc", "1e30", "1" + "0" * 30, " 100 ", "12.5", "NaN", "-0"]),
                    st.text(min_size=39, max_size=42),
                    st.floats(allow_nan=False, allow_infinity=False),
                    other_types,
                )
            )
        }
    if field == "schema_version":
        return {field: draw(st.one_of(st.sampled_from([0, 1, 1000, 1001]), other_types))}
    if field == "event_id":
        raw = uuid.uuid4()
        return {field: draw(st.sampled_from([str(raw).upper(), raw.hex, "", str(raw)[:-1]]))}
    if field == "occurred_at":
        return {
            field: draw(
                st.sampled_from(
                    [
                        "2026-12-01T10:00:00",
                        "2026-02-30T10:00:00Z",
                        "9999-12-31T23:59:59Z",
                        "1970-01-01T00:00:00+23:59",
                        "now",
                        1764583200,
                    ]
                )
            )
        }
    if field == "type":
        return {field: draw(st.sampled_from(["placebet", "OpenBook", "CoupResolved", "", ...]))}
    if field == "table_id":
        return {field: draw(st.sampled_from(["x" * 64, "x" * 65, "a b", "ünïcode", ""]))}
    if field == "extra":
        return {draw(st.text(min_size=1, max_size=20).filter(lambda n: n not in TEXT_BOUNDS)): 1}
    return {draw(st.sampled_from(["bet_id", "amount", "currency", "occurred_at"])): ...}


def expected(value: bytes) -> str | None:
    """What the contract says of a PlaceBet record: None (it must be answered: it is valid, or
    its bet id can be read), else the reason of its dead letter."""
    try:
        decode(BET_COMMANDS, value)
    except ContractError as error:
        return None if refused_bet(error, None) is not None else error.reason
    return None


@SQLITE
@pytest.mark.timeout(180)
async def test_poison_pills_are_dead_letters_and_the_bets_around_them_are_answered(
    hostile: HostileSystem,
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    coup = opened.coup_id
    key = table.encode()
    await accepted_all(hostile, honest_bets(table, coup)[:1])

    def pill(**fields: Any) -> bytes:
        return json.dumps(place_bet_document(table, coup, **fields)).encode()

    deep_object = b'{"a":' * 10_000 + b"1" + b"}" * 10_000
    pills: list[tuple[str, bytes | None, bytes | None, str | None]] = [
        (BET_COMMANDS, pill(bet_type="x" * 600_000), key, None),  # its bet id: answered
        (BET_COMMANDS, pill(bettor_id="x" * 900_000), key, None),
        (BET_COMMANDS, pill(bet_id="x" * 65, amount=10**25), key, "bet_id"),
        (BET_COMMANDS, b"\xff\xfe{{ not JSON", key, "not JSON"),
        (BET_COMMANDS, b"", key, "not JSON"),
        (BET_COMMANDS, b"[1, 2, 3]", key, "expected a JSON object"),
        (BET_COMMANDS, b'"a string"', key, "expected a JSON object"),
        (BET_COMMANDS, b"42", key, "expected a JSON object"),
        (BET_COMMANDS, b"null", key, "expected a JSON object"),
        (BET_COMMANDS, b"[" * 10_000, key, "not JSON"),
        (BET_COMMANDS, b"[" * 10_000 + b"]" * 10_000, key, "not JSON"),
        (BET_COMMANDS, deep_object, key, "not JSON"),
        (BET_COMMANDS, None, key, "empty message"),
        (BET_COMMANDS, pill(amount=1), b"k" * 100_000, None),  # answered: BELOW_MINIMUM
        (BET_COMMANDS, pill(**{f"x{i}": i for i in range(10_000)}), key, None),
        (BET_COMMANDS, pill(amount="#").replace(b'"#"', b"9" * 5000), key, "not JSON"),
        (BET_COMMANDS, pill(amount=1e300), key, None),
        (TABLE_COMMANDS, b"[" * 10_000, key, "not JSON"),
        (TABLE_COMMANDS, b'{"type": "OpenTable", "limits": ' + b"[" * 5_000, key, "not JSON"),
        (TABLE_COMMANDS, None, key, "empty message"),
        (SHOE_COMMANDS, b"[" * 10_000, key, "untrusted headers"),
    ]
    too_big = pill(bettor_id="x" * 2_000_000)
    try:
        await hostile.attacker.send(BET_COMMANDS, too_big, key=key)
    except KafkaError as refused:  # the broker's limit (message.max.bytes, 1 MiB by default)
        assert "TooLarge" in type(refused).__name__, refused
    else:
        pills.append((BET_COMMANDS, too_big, key, None))

    # Bounds of every field: what the contract admits gets an answer, the rest a dead letter.
    bounded = [
        pill(**fields)
        for fields in [
            *({name: "b" * bound} for name, bound in TEXT_BOUNDS.items()),
            *({name: "b" * (bound + 1)} for name, bound in TEXT_BOUNDS.items()),
            {"amount": 2**53 - 1},
            {"amount": 2**53},
            {"amount": -(2**53) + 1},
            {"amount": -(2**53)},
            {"amount": "9" * 40},
            {"amount": "9" * 41},
            {"schema_version": 1000},
            {"schema_version": 1001},
            {"table_id": "t" * 64},
            {"table_id": "t" * 65},
        ]
    ] + [
        json.dumps(place_bet_document(table, coup, **m)).encode()
        for m in examples(mutated_bet(), 40)
    ]
    sent: list[tuple[str, int, int, bytes | None, str | None]] = []
    for topic, value, record_key, reason in pills:
        record = await hostile.attacker.send(topic, value, key=record_key)
        sent.append((topic, record.partition, record.offset, value, reason))
    for value in bounded:
        document = json.loads(value)
        record = await hostile.attacker.send(BET_COMMANDS, value, key=key)
        sent.append((BET_COMMANDS, record.partition, record.offset, value, expected(value)))
        assert isinstance(document, dict)
    after = honest_bets(table, coup)[1:]
    for command in after:
        await hostile.sender.send(command)
    await hostile.sender.flush()

    def bet_id(value: bytes | None) -> str | None:
        try:
            found = json.loads(value or b"").get("bet_id")
        except (ValueError, AttributeError, RecursionError):
            return None
        return found if isinstance(found, str) else None

    def done() -> bool:
        for topic, partition, offset, value, reason in sent:
            if reason is None:
                if not answers(hostile, bet_id(value) or "?"):
                    return False
            elif not letters_for(hostile, topic, partition, offset):
                return False
        return all(answers(hostile, b.bet_id) for b in after)

    await until(hostile, done, 90, "a dead letter or an answer for every pill, answers to all")
    for topic, partition, offset, value, reason in sent:
        shown = (value or b"")[:120]
        if reason is None:
            assert not letters_for(hostile, topic, partition, offset), shown
            continue
        [letter] = letters_for(hostile, topic, partition, offset)
        assert reason.split(":")[0] in letter.error, (shown, reason, letter.error)
        assert len(letter.error) <= 2000 and len(letter.key or "") <= MAX_HEADER_CHARS
        if value is None:
            assert letter.payload_size is None and letter.payload_b64 == ""
        else:
            assert letter.payload_size == len(value)
            assert letter.payload_sha256 == hashlib.sha256(value).hexdigest()
            kept = base64.b64decode(letter.payload_b64)
            assert kept == value[:MAX_DEAD_LETTER_PAYLOAD]
        assert len(encode(letter)) < 512 * 1024
    for command in after:
        assert isinstance(last_answer(hostile, command.bet_id), BetAccepted), command.bet_id

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await until(hostile, lambda: settled(hostile, coup), 60, "the coup settled")
    await play_coup(hostile, table, 2)
    await crowd_goes_on(hostile, crowd_table, 3)
    await finish(hostile, driver, [table])


# ---- values without bounds ---------------------------------------------------------------


def open_table_document(table_id: str, **fields: Any) -> bytes:
    document = json.loads(
        encode(
            OpenTable(
                table_id=table_id,
                decks=1,
                limits=LIMITS,
                currency="EUR",
                betting_window_ms=60_000,
                cut_card_from_end=14,
            )
        )
    )
    document.update(fields)
    return json.dumps(document).encode()


@pytest.mark.timeout(180)
async def test_values_beyond_their_bounds_are_refused_and_the_largest_allowed_are_exact(
    hostile: HostileSystem,
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    await accepted_all(hostile, honest_bets(table, opened.coup_id))

    # Amounts: a JSON integer beyond +-(2^53 - 1) breaks the schema, but the bet id can be
    # read: answered INVALID_AMOUNT, the amount echoed as text; any text of at most 40
    # characters is answered too.
    huge_bet = place_bet_document(table, opened.coup_id, amount=10**30)
    await hostile.attacker.send(BET_COMMANDS, json.dumps(huge_bet).encode(), key=table.encode())
    texts = {
        "abc": "INVALID_AMOUNT",
        "1" + "0" * 30: "INVALID_AMOUNT",
        "1e13": "ABOVE_MAXIMUM",
        "-100": "INVALID_AMOUNT",
        "100.5": "INVALID_AMOUNT",
        "Infinity": "INVALID_AMOUNT",
    }
    worded = {
        text: bet(table, opened.coup_id, f"w-{i}", "tie", 100).model_copy(update={"amount": text})
        for i, text in enumerate(texts)
    }
    await place_all(hostile, list(worded.values()))
    for text, command in worded.items():
        answer = last_answer(hostile, command.bet_id)
        assert isinstance(answer, BetRejected) and answer.reason_code == texts[text], (text, answer)

    # Table settings beyond their bounds: dead letters; impossible ones: CommandRejected.
    beyond = {
        "betting_window_ms": {"betting_window_ms": 10**15},
        "limits": {"limits": {"tie": {"minimum": 1, "maximum": 10**14 + 1}}},
        "decks": {"decks": 9},
        "cut_card_from_end": {"cut_card_from_end": 10**9},
    }
    refused_tables = {}
    for name, fields in beyond.items():
        table_id = f"{table}-{name[:5]}"
        record = await hostile.attacker.send(
            TABLE_COMMANDS, open_table_document(table_id, **fields), key=table_id.encode()
        )
        refused_tables[name] = (table_id, record)
    impossible = {
        "INVALID_SETTINGS": {"limits": {"tie": {"minimum": 500, "maximum": 100}}},
        "UNKNOWN_PAYTABLE": {"paytable": "tie-99-to-1"},
    }
    rejected_ids = {}
    for code, fields in impossible.items():
        table_id = f"{table}-{code[:7].lower()}"
        command_id = str(uuid.uuid4())
        await hostile.attacker.send(
            TABLE_COMMANDS,
            open_table_document(table_id, event_id=command_id, **fields),
            key=table_id.encode(),
        )
        rejected_ids[code] = uuid.UUID(command_id)

    # The largest table the contract allows: limits of 10^14, a one-hour window.
    biggest = f"{table}-max"
    limits = {
        kind: BetLimitSpec(minimum=1, maximum=MAX_STAKE)
        for kind in ("player", "banker", "tie", "player_pair", "banker_pair")
    }
    await hostile.sender.send_now(
        OpenTable(
            table_id=biggest,
            decks=8,
            limits=limits,
            currency="EUR",
            betting_window_ms=3_600_000,
            cut_card_from_end=16,
        )
    )
    await until(hostile, lambda: betting_opened(hostile, biggest), 60, "the largest table open")
    big_coup = betting_opened(hostile, biggest)[0].coup_id
    whales = [bet(biggest, big_coup, f"whale-{i}", "player_pair", MAX_STAKE) for i in range(8)]
    await place_all(hostile, whales)
    codes = [getattr(last_answer(hostile, w.bet_id), "reason_code", "ACCEPTED") for w in whales]
    assert codes == ["ACCEPTED"] * 7 + ["ABOVE_MAXIMUM"], codes  # 12 x stakes <= 2^53 - 1

    def refused_all() -> bool:
        return (
            bool(answers(hostile, huge_bet["bet_id"]))
            and all(
                letters_for(hostile, TABLE_COMMANDS, r.partition, r.offset)
                for _, r in refused_tables.values()
            )
            and {m.command_id for m in hostile.seen(CommandRejected)} >= set(rejected_ids.values())
        )

    await until(hostile, refused_all, 60, "every value beyond its bound refused")
    [huge_answer] = answers(hostile, huge_bet["bet_id"])
    assert isinstance(huge_answer, BetRejected), huge_answer
    assert (huge_answer.reason_code, huge_answer.amount) == ("INVALID_AMOUNT", str(10**30))
    for name, (table_id, record) in refused_tables.items():
        [letter] = letters_for(hostile, TABLE_COMMANDS, record.partition, record.offset)
        assert letter.service == "dealing" and name in letter.error, letter.error
        assert not [m for m in hostile.seen(TableOpened) if m.table_id == table_id]
    for code, command_id in rejected_ids.items():
        [rejection] = {
            m.event_id: m for m in hostile.seen(CommandRejected) if m.command_id == command_id
        }.values()
        assert rejection.reason_code == code, rejection

    await hostile.sender.send_now(CloseBetting(table_id=biggest, coup_id=big_coup))
    await until(hostile, lambda: settled(hostile, big_coup), 60, "the biggest coup settled")
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=opened.coup_id))
    await until(hostile, lambda: settled(hostile, opened.coup_id), 60, "the coup settled")
    await play_coup(hostile, table, 2)
    await crowd_goes_on(hostile, crowd_table, 3)
    await finish(hostile, driver, [table, biggest])
