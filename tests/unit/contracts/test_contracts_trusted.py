"""``trusted`` (the relay's bulk path) builds exactly the message validation would."""

import json
import re
import warnings
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from contracts import BetAccepted, BetSettled, encode
from contracts.envelope import BetId, Identifier, Uuid, uuid_of_int
from contracts.trusted import trusted

ids = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=20)
"""Ids as the contract admits them: no control character."""
stamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
bet_types = st.sampled_from(["player", "banker", "tie", "player_pair", "banker_pair"])
money = st.integers(min_value=0, max_value=10**12)


def _settled(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "BetSettled",
        "event_id": values["event_id"],
        "schema_version": 1,
        "occurred_at": values["occurred_at"],
        "causation_id": None,
        "correlation_id": None,
        "table_id": "t-1",
        "bet_id": values["bet_id"],
        "coup_id": values["coup_id"],
        "bettor_id": values["bettor_id"],
        "bet_type": values["bet_type"],
        "result": values["result"],
        "stake": values["stake"],
        "payout": values["payout"],
        "returned": values["returned"],
        "currency": "EUR",
        "operator": values.get("operator", "house"),
    }


@given(
    st.fixed_dictionaries(
        {
            "event_id": st.uuids(),
            "occurred_at": stamps,
            "bet_id": ids,
            "coup_id": ids,
            "bettor_id": ids,
            "bet_type": bet_types,
            "result": st.sampled_from(["WIN", "LOSE", "PUSH"]),
            "stake": st.integers(min_value=1, max_value=10**12),
            "payout": money,
            "returned": money,
        }
    )
)
def test_a_trusted_bet_settled_equals_and_encodes_like_the_validated_one(
    values: dict[str, Any],
) -> None:
    fields = _settled(values)
    validated = BetSettled(**fields)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a serializer warning means a wrong Python type
        built = trusted(BetSettled, dict(fields))
        assert encode(built) == encode(validated)
    assert built == validated
    assert built.model_fields_set == validated.model_fields_set


@given(st.uuids(), stamps, st.one_of(st.none(), stamps), bet_types, st.integers(1, 10**12))
def test_a_trusted_bet_accepted_given_in_any_order_encodes_in_the_model_order(
    event_id: UUID, occurred_at: datetime, placed_at: datetime | None, bet_type: str, amount: int
) -> None:
    fields = {
        "operator": "house",
        "placed_at": placed_at,
        "amount": amount,
        "currency": "EUR",
        "bet_type": bet_type,
        "bettor_id": "p",
        "coup_id": "c",
        "bet_id": "b",
        "table_id": "t",
        "correlation_id": None,
        "causation_id": None,
        "occurred_at": occurred_at,
        "schema_version": 1,
        "event_id": event_id,
        "type": "BetAccepted",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert encode(trusted(BetAccepted, fields)) == encode(BetAccepted(**fields))


def test_an_aware_time_from_an_iso_string_encodes_like_a_validated_one() -> None:
    """Stored times come back through ``datetime.fromisoformat`` (``+00:00``, ``Z``, offsets)."""
    base = _settled(
        {
            "event_id": UUID(int=7),
            "occurred_at": datetime.fromisoformat("2026-11-30T05:00:00+00:00"),
            "bet_id": "b",
            "coup_id": "c",
            "bettor_id": "p",
            "bet_type": "tie",
            "result": "LOSE",
            "stake": 100,
            "payout": 0,
            "returned": 0,
        }
    )
    assert encode(trusted(BetSettled, dict(base))) == encode(BetSettled(**base))
    assert b'"occurred_at":"2026-11-30T05:00:00Z"' in encode(trusted(BetSettled, dict(base)))


def test_missing_or_unknown_fields_are_refused() -> None:
    fields = _settled(
        {
            "event_id": UUID(int=1),
            "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
            "bet_id": "b",
            "coup_id": "c",
            "bettor_id": "p",
            "bet_type": "tie",
            "result": "LOSE",
            "stake": 1,
            "payout": 0,
            "returned": 0,
        }
    )
    without = dict(fields)
    del without["stake"]
    with pytest.raises(ValueError, match=r"missing fields \['stake'\]"):
        trusted(BetSettled, without)
    with pytest.raises(ValueError, match=r"unknown \['extra'\]"):
        trusted(BetSettled, {**fields, "extra": 1})


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_a_uuid_made_from_its_int_is_the_uuid_the_standard_library_makes(value: int) -> None:
    made, standard = uuid_of_int(value), UUID(int=value)
    assert (made, hash(made), str(made), made.is_safe) == (
        standard,
        hash(standard),
        str(standard),
        standard.is_safe,
    )
    assert made.__getstate__() == standard.__getstate__()


SETTLED: dict[str, Any] = {
    "occurred_at": datetime(2026, 12, 1, tzinfo=UTC),
    "table_id": "t1",
    "bet_id": "b1",
    "coup_id": "t1.c1",
    "bettor_id": "p1",
    "bet_type": "player",
    "result": "WIN",
    "stake": 100,
    "payout": 100,
    "returned": 200,
    "currency": "EUR",
}


@given(st.uuids(), st.booleans())
def test_a_message_id_is_read_from_its_text_as_the_standard_library_reads_it(
    value: UUID, upper: bool
) -> None:
    text = str(value).upper() if upper else str(value)
    message = BetSettled.model_validate_json(
        encode(BetSettled(**SETTLED, event_id=value)).replace(str(value).encode(), text.encode())
    )
    assert message.event_id == UUID(text) and hash(message.event_id) == hash(UUID(text))


_HYPHENATED = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


class _Read(BaseModel):
    uuid: Uuid | None = None
    identifier: Identifier | None = None
    bet_id: BetId | None = None


def _both_ways(field: str, text: object) -> tuple[Any, Any]:
    """``field`` read from ``text`` from Python and from JSON (None: refused, and then both
    ways must say why alike)."""
    read, errors = [], []
    for how in (_Read.model_validate, _Read.model_validate_json):
        value = {field: text} if how == _Read.model_validate else json.dumps({field: text})
        try:
            read.append(getattr(how(value, strict=True), field))
        except ValidationError as error:
            read.append(None)
            errors.append([(item["type"], item["msg"]) for item in error.errors()])
    assert len(errors) != 1, f"one way refused {text!r}: {errors}"
    assert not errors or errors[0] == errors[1]
    return read[0], read[1]


uuid_texts = st.one_of(
    st.uuids().flatmap(
        lambda u: st.sampled_from(
            [str(u), str(u).upper(), u.hex, f"{{{u}}}", u.urn, f" {u}", f"{u}\n", str(u)[:-1]]
        )
    ),
    st.text(alphabet="0123456789abcdefABCDEFg-{}: \n\u0661", min_size=30, max_size=40),
    st.sampled_from([None, 123, 1.5, True, [], {}]),
)


@given(uuid_texts)
def test_a_uuid_is_read_from_json_as_from_python_the_hyphenated_text_alone(text: object) -> None:
    """JSON is read by pydantic-core alone (``_FromJson``), Python by ``_uuid``: the same
    texts admitted, as the same UUID, and the same reasons for the others."""
    from_python, from_json = _both_ways("uuid", text)
    assert from_json == from_python
    assert (from_json is not None) == (isinstance(text, str) and bool(_HYPHENATED.fullmatch(text)))


ids = st.one_of(
    st.text(max_size=130),
    st.text(st.characters(max_codepoint=0xA0), max_size=70),
    st.sampled_from(["", "a" * 64, "a" * 65, "a" * 128, "a" * 129, "a\x85", "a\u2028b", None, 7]),
)


@given(st.sampled_from(["identifier", "bet_id"]), ids)
def test_an_id_is_read_from_json_as_from_python(field: str, text: object) -> None:
    """An id: 1 to 128 (a bet's: 64) characters, none a control character (U+0000-U+001F,
    U+007F-U+009F), read alike from JSON (pydantic-core alone) and from Python, and refused
    for the same reasons."""
    from_python, from_json = _both_ways(field, text)
    assert from_json == from_python
    longest = 64 if field == "bet_id" else 128
    good = (
        isinstance(text, str)
        and 1 <= len(text) <= longest
        and not re.search("[\x00-\x1f\x7f-\x9f]", text)
    )
    assert (from_json is not None) == good
