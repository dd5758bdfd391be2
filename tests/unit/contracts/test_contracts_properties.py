"""Property tests: decode never fails with anything but ContractError."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import contracts as c
from contracts.topics import FORMER_TOPIC_MESSAGES
from tests.unit.contracts.samples import samples

TOPICS = sorted(c.TOPIC_MESSAGES)
SAMPLE_DOCUMENTS = [json.loads(c.encode(message)) for message in samples()]

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


def _decode_or_contract_error(topic: str, data: bytes) -> None:
    try:
        message = c.decode(topic, data)
    except c.ContractError as error:
        assert error.reason
    else:  # one the topic carries, or carried before (CommandRejected on table-events)
        former = FORMER_TOPIC_MESSAGES.get(topic, ())
        assert c.topic_for(message) == topic or type(message) in former


@given(topic=st.sampled_from(TOPICS), data=st.binary(max_size=200))
def test_decode_of_arbitrary_bytes_raises_only_contract_error(topic: str, data: bytes) -> None:
    _decode_or_contract_error(topic, data)


@given(topic=st.sampled_from(TOPICS), value=json_values)
def test_decode_of_arbitrary_json_raises_only_contract_error(topic: str, value: Any) -> None:
    _decode_or_contract_error(topic, json.dumps(value).encode())


timestamps: st.SearchStrategy[str] = st.builds(
    lambda when, minutes: (
        when.isoformat() + f"{'-' if minutes < 0 else '+'}"
        f"{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    ),
    st.datetimes(),
    st.integers(-(24 * 60 - 1), 24 * 60 - 1),
)
"""RFC 3339 times with any offset, the first and last days of the calendar included."""


@settings(max_examples=300)
@given(
    document=st.sampled_from(SAMPLE_DOCUMENTS),
    topic=st.sampled_from(TOPICS),
    changes=st.dictionaries(
        st.sampled_from(["amount", "table_id", "type", "event_id", "occurred_at", "limits", "x"]),
        json_values | timestamps,
        max_size=3,
    ),
    dropped=st.sets(st.sampled_from(["type", "table_id", "event_id", "coup_id", "amount"])),
)
def test_decode_of_mutated_messages_raises_only_contract_error(
    document: dict[str, Any], topic: str, changes: dict[str, Any], dropped: set[str]
) -> None:
    mutated = {k: v for k, v in (document | changes).items() if k not in dropped}
    _decode_or_contract_error(topic, json.dumps(mutated).encode())


def test_decode_survives_deeply_nested_json() -> None:
    for data in (
        b"[" * 100_000,
        b'{"type":"PlaceBet","a":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ):
        _decode_or_contract_error(c.BET_COMMANDS, data)


def test_decode_survives_huge_integers() -> None:
    _decode_or_contract_error(c.BET_COMMANDS, b'{"type":"PlaceBet","amount":' + b"9" * 5000 + b"}")


def test_decode_survives_exponents_beyond_decimal_s() -> None:
    for number in (b"1e1000000000000000000", b"-1.5E-1000000000000000000"):
        _decode_or_contract_error(c.BET_COMMANDS, b'{"type":"PlaceBet","amount":' + number + b"}")
