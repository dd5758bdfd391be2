"""Encoding, decoding and routing of every contract message."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

import contracts as c
from tests.unit.contracts.samples import TABLE, samples

SAMPLES = samples()


def _wire(message: c.Message) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(c.encode(message))
    return document


def _reason(topic: str, document: Any) -> str:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    with pytest.raises(c.ContractError) as caught:
        c.decode(topic, data)
    return caught.value.reason


def test_samples_cover_every_message_type() -> None:
    assert sorted(type(m).__name__ for m in SAMPLES) == sorted(c.MESSAGE_TYPES)


def test_every_message_type_travels_on_exactly_one_topic() -> None:
    seen = [m.__name__ for models in c.TOPIC_MESSAGES.values() for m in models]
    assert len(seen) == len(set(seen))
    assert c.topic_for(c.PlaceBet) == c.BET_COMMANDS
    assert c.topic_for(c.CommandRejected) == c.COMMAND_EVENTS


def test_a_refused_command_is_published_apart_and_still_read_where_it_was() -> None:
    """Issue 20, item 12: dealing's answers to table commands (their texts may name a
    supervisor's key) leave table-events, which every gateway reads, for command-events;
    a CommandRejected published on table-events before still decodes there."""
    [rejected] = [m for m in SAMPLES if isinstance(m, c.CommandRejected)]
    assert c.CommandRejected not in c.TOPIC_MESSAGES[c.TABLE_EVENTS]
    assert c.TOPIC_OWNERS[c.COMMAND_EVENTS] == "dealing"
    assert c.decode(c.TABLE_EVENTS, c.encode(rejected)) == rejected
    assert c.decode(c.COMMAND_EVENTS, c.encode(rejected)) == rejected
    assert "belongs on 'punto-banco.command-events'" in _reason(c.BET_EVENTS, c.encode(rejected))


def test_topic_names_are_the_agreed_ones() -> None:
    assert {
        c.TABLE_COMMANDS,
        c.BET_COMMANDS,
        c.SHOE_COMMANDS,
        c.SHOE_EVENTS,
        c.TABLE_EVENTS,
        c.BET_EVENTS,
        c.DEAD_LETTERS,
    } == {
        "punto-banco.table-commands",
        "punto-banco.bet-commands",
        "punto-banco.shoe-commands",
        "punto-banco.shoe-events",
        "punto-banco.table-events",
        "punto-banco.bet-events",
        "punto-banco.dead-letters",
    }


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_through_its_topic(message: c.Message) -> None:
    data = c.encode(message)
    assert isinstance(data, bytes)
    decoded = c.decode(c.topic_for(message), data)
    assert decoded == message
    assert type(decoded) is type(message)
    assert c.encode(decoded) == data


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_the_wire_form_carries_type_and_envelope(message: c.Message) -> None:
    document = _wire(message)
    assert document["type"] == type(message).__name__
    for field in ("event_id", "schema_version", "occurred_at", "causation_id", "correlation_id"):
        assert field in document
    assert document["occurred_at"].endswith("Z")


@pytest.mark.parametrize(
    "message",
    [m for m in SAMPLES if not isinstance(m, c.SealAnchored)],
    ids=lambda m: type(m).__name__,
)
def test_partition_key_is_the_table_id(message: c.Message) -> None:
    assert c.partition_key(message) == TABLE.encode()


def test_a_seal_anchor_is_keyed_by_its_service() -> None:
    (anchor,) = [m for m in SAMPLES if isinstance(m, c.SealAnchored)]
    assert c.partition_key(anchor) == b"dealing"
    assert c.topic_for(anchor) == c.SEALS


def test_a_dead_letter_without_key_or_table_has_an_empty_partition_key() -> None:
    letter = c.DeadLetter(
        original_topic=c.BET_COMMANDS,
        partition=0,
        offset=1,
        key=None,
        payload_b64="",
        error="not JSON",
        service="settlement",
    )
    assert c.partition_key(letter) == b""
    assert c.partition_key(letter.model_copy(update={"table_id": "t-9"})) == b"t-9"


def test_envelope_defaults_are_fresh_ids_and_utc_now() -> None:
    first = c.CloseShoe(table_id=TABLE, shoe_id="s")
    second = c.CloseShoe(table_id=TABLE, shoe_id="s")
    assert first.event_id != second.event_id
    assert first.schema_version == 1
    assert first.occurred_at.tzinfo is not None
    assert abs(datetime.now(UTC) - first.occurred_at) < timedelta(minutes=1)


def test_timestamps_are_normalised_to_utc_and_naive_ones_refused() -> None:
    paris = datetime(2026, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    message = c.CloseTable(table_id=TABLE, occurred_at=paris)
    assert message.occurred_at == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert message.occurred_at.utcoffset() == timedelta(0)
    with pytest.raises(ValidationError, match="timezone"):
        c.CloseTable(table_id=TABLE, occurred_at=datetime(2026, 1, 1, 12, 0))


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-00:01"])
@pytest.mark.parametrize("message", SAMPLES, ids=lambda message: type(message).__name__)
def test_a_time_utc_cannot_hold_is_refused_with_a_reason_not_an_overflow(
    message: c.Message, when: str
) -> None:
    """Read as a datetime, but a year 0 or 10000 in UTC: refused like any bad field (an
    OverflowError escaped decode and made the consumer read the record again, forever)."""
    document = {**_wire(message), "occurred_at": when}
    reason = _reason(c.topic_for(message), document)
    assert "occurred_at" in reason and "a time UTC can hold" in reason
    with pytest.raises(ValidationError, match="a time UTC can hold"):
        type(message).model_validate({**document, "occurred_at": datetime.fromisoformat(when)})
    within = {**document, "occurred_at": "0001-01-01T00:00:00-01:00"}
    read = c.decode(c.topic_for(message), json.dumps(within).encode())
    assert read.occurred_at == datetime(1, 1, 1, 1, 0, tzinfo=UTC)


def test_messages_are_immutable() -> None:
    message = c.CloseTable(table_id=TABLE)
    with pytest.raises(ValidationError):
        message.reason = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("table_id", ["", "a" * 65, "table 1", "tisch/1", "tâble"])
def test_bad_table_ids_are_refused(table_id: str) -> None:
    with pytest.raises(ValidationError):
        c.CloseTable(table_id=table_id)


def test_rejection_codes_are_exactly_the_agreed_set() -> None:
    from typing import get_args

    assert set(get_args(c.RejectionCode)) == {
        "NO_SUCH_TABLE",
        "NO_SUCH_COUP",
        "BETTING_CLOSED",
        "BELOW_MINIMUM",
        "ABOVE_MAXIMUM",
        "OPPOSING_BETS",
        "WRONG_CURRENCY",
        "INVALID_AMOUNT",
        "UNKNOWN_BET_TYPE",
        "BET_TYPE_NOT_OFFERED",
        "TABLE_CLOSED",
        "BOOK_FULL",
        "DUPLICATE_BET_ID",
        "INVALID_BETTOR_ID",
        "INVALID_ENVELOPE",
        "WRONG_KEY",
        "WRONG_PARTITION",
    }
    assert {"SUPERVISOR_REQUIRED", "COUP_NOT_VOIDABLE", "UNKNOWN_PAYTABLE"} <= set(
        get_args(c.CommandRejectionCode)
    )
    # a misplaced command is answered with the same codes by dealing and settlement, and a
    # misplaced fact is an incident of that code
    for codes in (c.RejectionCode, c.CommandRejectionCode, c.IncidentCode):
        assert set(get_args(codes)) >= c.MISPLACED == {"WRONG_KEY", "WRONG_PARTITION"}
    decisions = {
        "AUTHORIZATION_MALFORMED",
        "UNKNOWN_SUPERVISOR_KEY",
        "SUPERVISOR_KEY_RETIRED",
        "BAD_SIGNATURE",
        "AUTHORIZATION_EXPIRED",
        "AUTHORIZATION_MISMATCH",
        "AUTHORIZATION_REPLAYED",
        "VOID_WINDOW_PASSED",
    }
    assert decisions <= set(get_args(c.CommandRejectionCode))


# --- PlaceBet is lenient where settlement must answer with BetRejected -------------------------

PLACE_BET = next(m for m in SAMPLES if isinstance(m, c.PlaceBet))


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (2500, 2500),
        (-10, -10),
        (0, 0),
        (2**53 - 1, 2**53 - 1),
        (1e3, 1000),
        ("12.30", "12.30"),
        ("ten", "ten"),
        ("", ""),
        ("x" * 40, "x" * 40),
    ],
)
def test_place_bet_keeps_any_json_integer_or_short_text_as_amount(
    amount: Any, expected: int | str
) -> None:
    # Kept as received: settlement answers a bad one with INVALID_AMOUNT (never a dead letter).
    document = _wire(PLACE_BET) | {"amount": amount}
    decoded = c.decode(c.BET_COMMANDS, json.dumps(document).encode())
    assert isinstance(decoded, c.PlaceBet)
    assert decoded.amount == expected
    assert type(decoded.amount) is type(expected)


def test_place_bet_keeps_unknown_bet_types_and_currencies_for_settlement_to_reject() -> None:
    document = _wire(PLACE_BET) | {"bet_type": "dragon", "currency": "euros"}
    decoded = c.decode(c.BET_COMMANDS, json.dumps(document).encode())
    assert isinstance(decoded, c.PlaceBet)
    assert (decoded.bet_type, decoded.currency) == ("dragon", "euros")


def test_place_bet_amount_is_written_back_as_received() -> None:
    assert _wire(PLACE_BET)["amount"] == 2500
    assert _wire(PLACE_BET.model_copy(update={"amount": "25.50"}))["amount"] == "25.50"


@pytest.mark.parametrize(
    "amount", [True, None, [1], {"v": 1}, 25.5, 2**53, -(2**53), 1e16, "x" * 41]
)
def test_place_bet_refuses_amounts_that_are_floats_oversized_or_not_amounts(amount: Any) -> None:
    # Money is never a fraction; an integer beyond 2^53 or a text beyond 40 characters is
    # outside the schema: a dead letter, as the published JSON Schema says.
    document = _wire(PLACE_BET) | {"amount": amount}
    assert _reason(c.BET_COMMANDS, document).startswith("invalid PlaceBet: amount: ")


@pytest.mark.parametrize(
    ("field", "value"),
    [("bet_type", "b" * 33), ("currency", "c" * 17), ("bet_id", "i" * 65), ("coup_id", "c" * 129)],
)
def test_place_bet_refuses_oversized_fields(field: str, value: str) -> None:
    document = _wire(PLACE_BET) | {field: value}
    assert _reason(c.BET_COMMANDS, document).startswith(f"invalid PlaceBet: {field}: ")


@pytest.mark.parametrize("field", ["bet_id", "coup_id", "bettor_id"])
@pytest.mark.parametrize("char", ["\x00", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9f"])
def test_ids_refuse_control_characters(field: str, char: str) -> None:
    """A NUL cannot be stored in PostgreSQL's text, a line feed or an escape forges log lines:
    an id holding one is no readable id (a dead letter); any other character is an id's."""
    document = _wire(PLACE_BET) | {field: f"id{char}x"}
    reason = _reason(c.BET_COMMANDS, document)
    assert reason.startswith(f"invalid PlaceBet: {field}: ") and "control character" in reason
    printable = _wire(PLACE_BET) | {field: "ünï cødé\u00a0\u2028 ok"}
    assert c.decode(c.BET_COMMANDS, json.dumps(printable).encode())


# --- decode errors say what was wrong --------------------------------------------------------


def test_decode_refuses_bytes_that_are_not_json() -> None:
    assert _reason(c.BET_COMMANDS, b"{not json").startswith("not JSON: ")
    assert _reason(c.BET_COMMANDS, b"\xff\xfe\x00garbage").startswith("not JSON: ")


def test_decode_refuses_json_that_is_not_an_object() -> None:
    assert _reason(c.BET_COMMANDS, [1, 2]) == "expected a JSON object, got an array"
    assert _reason(c.BET_COMMANDS, "PlaceBet") == "expected a JSON object, got a string"


def test_decode_refuses_a_missing_or_unknown_type() -> None:
    document = _wire(PLACE_BET)
    del document["type"]
    assert (
        _reason(c.BET_COMMANDS, document)
        == "missing field 'type' (expected one of: PlaceBet, OpenBook, CloseBook)"
    )
    assert _reason(c.BET_COMMANDS, document | {"type": 7}) == (
        "field 'type' must be a string, got a number"
    )
    assert _reason(c.BET_COMMANDS, document | {"type": "PlaceBets"}) == (
        "unknown message type 'PlaceBets' (expected one of: PlaceBet, OpenBook, CloseBook)"
    )


def test_decode_refuses_a_type_sent_to_the_wrong_topic() -> None:
    reason = _reason(c.TABLE_COMMANDS, _wire(PLACE_BET))
    assert reason == (
        "message type 'PlaceBet' is not allowed on topic 'punto-banco.table-commands' "
        "(allowed: OpenTable, CloseTable, CloseBetting, VoidCoup, CorrectCoup, CorrectResult); "
        "it belongs on 'punto-banco.bet-commands'"
    )


def test_decode_refuses_an_unknown_topic() -> None:
    assert _reason("punto-banco.nope", _wire(PLACE_BET)).startswith(
        "unknown topic 'punto-banco.nope'; known topics: punto-banco.table-commands"
    )


def test_decode_names_a_missing_field() -> None:
    document = _wire(PLACE_BET)
    del document["bettor_id"]
    assert _reason(c.BET_COMMANDS, document) == "invalid PlaceBet: bettor_id: Field required"


def test_decode_names_an_extra_field() -> None:
    document = _wire(PLACE_BET) | {"colour": "red"}
    assert _reason(c.BET_COMMANDS, document) == (
        "invalid PlaceBet: colour: Extra inputs are not permitted"
    )


def test_decode_names_nested_field_errors() -> None:
    opened = next(m for m in SAMPLES if isinstance(m, c.OpenTable))
    document = _wire(opened)
    document["limits"]["tie"]["minimum"] = 0
    assert _reason(c.TABLE_COMMANDS, document) == (
        "invalid OpenTable: limits.tie.minimum: Input should be greater than or equal to 1"
    )


def test_decode_requires_the_envelope_on_the_wire() -> None:
    document = _wire(PLACE_BET)
    del document["event_id"], document["occurred_at"]
    assert _reason(c.BET_COMMANDS, document) == (
        "invalid PlaceBet: event_id: Field required; occurred_at: Field required"
    )


def test_decode_is_strict_about_types_other_than_the_bet_amount() -> None:
    draw = next(m for m in SAMPLES if isinstance(m, c.DrawCards))
    document = _wire(draw) | {"count": "4"}
    assert _reason(c.SHOE_COMMANDS, document) == (
        "invalid DrawCards: count: Input should be a valid integer"
    )


@pytest.mark.parametrize("card", ["10H", "9h", "1S", "XX", "9", ""])
def test_decode_refuses_bad_card_codes(card: str) -> None:
    drawn = next(m for m in SAMPLES if isinstance(m, c.CardDrawn))
    reason = _reason(c.SHOE_EVENTS, _wire(drawn) | {"card": card})
    assert reason.startswith("invalid CardDrawn: card: String should match pattern")


def test_contract_error_is_a_value_error_carrying_topic_and_type() -> None:
    with pytest.raises(ValueError) as caught:
        c.decode(c.TABLE_COMMANDS, c.encode(PLACE_BET))
    error = caught.value
    assert isinstance(error, c.ContractError)
    assert (error.topic, error.message_type) == (c.TABLE_COMMANDS, "PlaceBet")
    assert str(error) == error.reason


def test_encode_refuses_things_that_are_not_messages() -> None:
    with pytest.raises(TypeError):
        c.encode({"type": "PlaceBet"})  # type: ignore[arg-type]


def test_decode_errors_stay_short_when_names_are_huge() -> None:
    document = _wire(PLACE_BET) | {"x" * 10_000: 1}
    assert len(_reason(c.BET_COMMANDS, document)) < 200
    assert len(_reason(c.BET_COMMANDS, {"type": "T" * 10_000})) < 200
