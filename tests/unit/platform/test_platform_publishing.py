"""Publishing stored events by field name: one validated message, or one trusted per line
(and its bytes from the fact's template)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any, NamedTuple
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts import (
    BetAccepted,
    BetRejected,
    BetSettled,
    CardDealt,
    CommandRejected,
    CoupVoided,
    encode,
)
from services.shared.facts.settlement import AnswerLine, SettledLine
from services.shared.platform.relay import envelope, message_id
from services.shared.platform.relay import lines as relay_lines
from services.shared.platform.relay.lines import Lines, line_ids, line_shape, publish_lines, wire
from services.shared.platform.relay.publishing import attr, one, payload_fields, publish_one

OID = UUID("0f7c9f0e-2f7b-4d35-9b0a-6f3a1b2c3d4e")
AT = datetime(2026, 12, 1, 10, 0, 0, 250000, tzinfo=UTC)


def stored(**fields: Any) -> Any:
    """A stored event as the relay sees it: originator, version, time, fields."""
    return SimpleNamespace(originator_id=OID, originator_version=7, timestamp=AT, **fields)


VOIDED = {
    "table_id": "t1",
    "coup_id": "t1.c1",
    "supervisor_id": "sup",
    "reason": "misdeal",
    "was_resolved": False,
}


def test_one_message_takes_the_events_fields_by_name_and_its_envelope() -> None:
    message = publish_one(CoupVoided, stored(**VOIDED, internal="not published"))
    assert message == CoupVoided(event_id=message_id(OID, 7, 0), occurred_at=AT, **VOIDED)
    assert publish_one(CoupVoided, stored(**VOIDED), 2).event_id == message_id(OID, 7, 2)


def test_given_values_override_or_derive_fields_and_unknown_ones_are_refused() -> None:
    message = publish_one(CoupVoided, stored(**VOIDED), reason="other", event_id=OID)
    assert (message.reason, message.event_id) == ("other", OID)
    with pytest.raises(TypeError, match="no fields"):
        publish_one(CoupVoided, stored(**VOIDED), reasons="typo")


def test_a_missing_field_fails_validation() -> None:
    with pytest.raises(ValidationError):
        publish_one(CoupVoided, stored(table_id="t1", coup_id="t1.c1", reason=""))


def test_a_publication_derives_fields_and_names_its_contract() -> None:
    rejected = stored(
        table_id="t1",
        command_id=OID,
        command_type="VoidCoup",
        reason_code="NO_SUCH_COUP",
        message="no coup",
    )
    publication = one(CommandRejected, causation_id=attr("command_id"))
    assert publication.contracts == (CommandRejected,)
    (message,) = publication(rejected)
    assert message.causation_id == OID and message.command_id == OID


def test_payload_fields_leave_the_envelope_out() -> None:
    assert payload_fields(CardDealt)[:3] == ("causation_id", "correlation_id", "table_id")
    assert "event_id" not in payload_fields(CardDealt)


def test_line_ids_are_the_first_envelope_id_with_the_index_in_its_low_bits() -> None:
    event = stored()
    ids = line_ids(event, 300)
    assert ids[0] == envelope(event)["event_id"]
    assert len(set(ids)) == 300
    assert [i.int ^ ids[0].int for i in ids] == list(range(300))
    assert all(i == UUID(int=i.int) and i.version == ids[0].version for i in ids)


@given(base=st.integers(0, 2**128 - 1), index=st.integers(0, 70_000))
def test_a_line_ids_text_is_the_uuids_text(base: int, index: int) -> None:
    """The relay writes an id from its constant head and last 32 bits: the same text as the
    UUID made (any id, indexes past 2**16 too), and each made only when read."""
    ids = relay_lines.LineIds(base, 70_001)
    assert ids.text(index) == str(ids[index]) == str(UUID(int=base ^ index))
    assert ids[-1] == ids[70_000] and ids[1:3] == [ids[1], ids[2]]
    with pytest.raises(IndexError):
        ids[70_001]


def _validated(line: SettledLine, event_id: UUID) -> bytes:
    return encode(
        BetSettled(
            event_id=event_id,
            occurred_at=AT,
            table_id="t1",
            coup_id="t1.c1",
            currency="EUR",
            **line._asdict(),
        )
    )


def test_lines_make_exactly_what_validation_makes_byte_for_byte() -> None:
    lines = [
        SettledLine("b1", "p1", "player", "WIN", 100, 100, 200),
        SettledLine("b2", "p2", "tie", "LOSE", 50, 0, 0),
    ]
    event = stored(table_id="t1", coup_id="t1.c1", currency="EUR", lines=lines)
    common = {"table_id": "t1", "coup_id": "t1.c1", "currency": "EUR"}
    made = publish_lines(BetSettled, event, lines, SettledLine, common=common)
    ids = line_ids(event, 2)
    assert [encode(m) for m in made] == [_validated(line, ids[i]) for i, line in enumerate(lines)]
    again = publish_lines(BetSettled, event, lines, SettledLine, common=common, ids=ids[::-1])
    assert [m.event_id for m in again] == ids[::-1]
    assert [wire(again, i) for i in range(2)] == [encode(m) for m in again]  # a list's ids
    with pytest.raises(TypeError, match="UUIDs"):  # its text would be written unescaped
        publish_lines(BetSettled, event, lines, SettledLine, common=common, ids=['x"', "y"])


def test_a_longer_line_publishes_its_known_fields_and_a_shorter_one_is_refused() -> None:
    shape = line_shape(BetSettled, SettledLine, ("table_id", "coup_id", "currency"))
    line = SettledLine("b1", "p1", "player", "WIN", 100, 100, 200)
    longer = (*line, "an item a newer writer added")
    common = ("t1", "t1.c1", "EUR")
    assert shape.make(OID, AT, common, longer) == shape.make(OID, AT, common, line)
    with pytest.raises(IndexError):
        shape.make(OID, AT, common, line[:6])


class Partial(NamedTuple):
    bet_id: str


def test_a_contract_field_with_no_source_fails_when_the_shape_is_made() -> None:
    with pytest.raises(TypeError, match=r"BetSettled\.bettor_id has no source"):
        line_shape(BetSettled, Partial, ("table_id", "coup_id", "currency"))


# -- the relay's templates: a line's bytes without its message --------------------------

TEXT = st.text(max_size=12)  # any text: quotes, backslashes, control and non-ASCII characters
WHOLE = st.integers(min_value=-(2**53), max_value=2**53)
SETTLED = st.builds(SettledLine, TEXT, TEXT, TEXT, TEXT, WHOLE, WHOLE, WHOLE)
WHEN = st.none() | st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-3))]))


def _wires(messages: Sequence[Any]) -> list[bytes]:
    return [wire(messages, index) for index in range(len(messages))]


@settings(max_examples=300, deadline=None)
@given(st.lists(SETTLED, min_size=1, max_size=6), st.sampled_from(["house", "acme"]), TEXT)
def test_a_lines_template_writes_what_encode_writes_byte_for_byte(
    lines: list[SettledLine], operator: str, table: str
) -> None:
    event = stored()
    common = {"table_id": table, "coup_id": "t1.c1", "currency": "EUR", "operator": operator}
    total = publish_one(CoupVoided, stored(**VOIDED))
    made = publish_lines(BetSettled, event, lines, SettledLine, common=common, then=[total])
    assert _wires(made) == [encode(message) for message in made]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TEXT, WHOLE, WHEN, st.booleans()), min_size=1, max_size=6))
def test_answers_with_their_placing_times_and_refusals_are_written_as_encode_writes_them(
    answers: list[tuple[str, int, datetime | None, bool]],
) -> None:
    shape = line_shape(
        BetAccepted, AnswerLine, ("table_id", "coup_id", "operator"), extra=("placed_at",)
    )
    lines = [AnswerLine(bet, "p1", "tie", amount, "EUR", None, "") for bet, amount, _, _ in answers]
    rejected = stored(
        table_id="t1",
        coup_id="c1",
        bet_id="r1",
        bettor_id="p1",
        bet_type="tie",
        amount="x",
        currency="EUR",
        reason_code="INVALID_AMOUNT",
        message="not a whole number",
    )
    refused = {
        index: publish_one(BetRejected, rejected, index)
        for index, (_, _, _, refuse) in enumerate(answers)
        if refuse
    }
    if len(refused) == len(lines):
        return  # no line of the shape to write
    ids = line_ids(stored(), len(lines))
    extras = [(when,) for _, _, when, _ in answers]
    made = Lines(shape, ids, AT, ("t1", "c1", "house"), lines, extras, refused)
    assert _wires(made) == [encode(message) for message in made]
    views = [made.view(index) for index in range(len(made))]
    assert [(v.type, v.event_id, v.bet_id, v.placed_at) for v in views] == [
        (m.type, m.event_id, m.bet_id, m.placed_at) for m in made
    ]


def test_lines_are_written_from_the_template_not_encoded_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [SettledLine(f"b{n}", f"p{n}", "player", "WIN", 100, 100, 200) for n in range(50)]
    lines[7] = SettledLine("b7", 'José "le\\grand"', "player", "WIN", 100, 100, 200)
    common = {"table_id": "t1", "coup_id": "t1.c1", "currency": "EUR", "operator": "house"}
    made = publish_lines(BetSettled, stored(), lines, SettledLine, common=common)
    expected = [encode(message) for message in made]
    encoded: list[Any] = []
    monkeypatch.setattr(relay_lines, "encode", lambda m: encoded.append(m) or encode(m))
    shape = line_shape(BetAccepted, AnswerLine, ("table_id", "coup_id", "operator"), ("placed_at",))
    answers = [AnswerLine(f"b{n}", "p1", "tie", 5, "EUR", None, "") for n in range(50)]
    placed = [(None if n == 0 else AT + timedelta(microseconds=n * 999_999),) for n in range(50)]
    accepted = Lines(shape, line_ids(stored(), 50), AT, ("t1", "c1", "acme"), answers, placed)
    accepted_bytes = _wires(accepted)
    assert _wires(made) == expected
    # each fact's sample alone, to cut its template from: text that is not plain ASCII, and a
    # line whose value has another type than the sample's, are written from the template too
    assert len(encoded) == 2
    assert accepted_bytes == [encode(message) for message in accepted]


def test_a_line_the_template_cannot_write_is_encoded_from_its_message() -> None:
    lines = [
        SettledLine("b1", "p1", "tie", "WIN", 100, 10**4400, 200),  # beyond str()'s digits
        SettledLine("b2", "p\ud800", "tie", "WIN", 100, 100, 200),  # a lone surrogate
        SettledLine("b3", "p3", "tie", "WIN", 100, 1.5, 200),  # a type without a writer
    ]
    common = {"table_id": "t1", "coup_id": "t1.c1", "currency": "EUR", "operator": "house"}
    made = publish_lines(BetSettled, stored(), lines, SettledLine, common=common)
    assert wire(made, 0) == encode(made[0])
    with pytest.raises(ValueError):  # neither path can write it
        encode(made[1])
    with pytest.raises(ValueError):
        wire(made, 1)
    with pytest.warns(UserWarning):  # pydantic: a float where an int is declared
        assert wire(made, 2) == encode(made[2])


def test_messages_are_read_by_negative_index_as_a_list_reads_them() -> None:
    lines = [SettledLine("b1", "p1", "player", "WIN", 100, 100, 200)]
    common = {"table_id": "t1", "coup_id": "t1.c1", "currency": "EUR", "operator": "house"}
    total = publish_one(CoupVoided, stored(**VOIDED))
    made = publish_lines(BetSettled, stored(), lines, SettledLine, common=common, then=[total])
    assert (made[-1], made.view(-1), wire(made, -1)) == (total, total, encode(total))
    assert made.view(-2).type == "BetSettled" and wire(made, -2) == encode(made[0])
    with pytest.raises(IndexError):
        made[-3]


def test_a_shape_whose_lines_would_differ_in_table_or_operator_is_refused() -> None:
    class Keyed(NamedTuple):
        table_id: str
        bet_id: str
        bettor_id: str
        bet_type: str
        result: str
        stake: int
        payout: int
        returned: int

    with pytest.raises(TypeError, match="share one table"):
        line_shape(BetSettled, Keyed, ("coup_id", "currency", "operator"))
