"""Tracking positions: relay headers trusted only on owned topics, from their owner, in range."""

import pytest
from eventsourcing.persistence import Tracking
from hypothesis import given
from hypothesis import strategies as st

from contracts import BET_COMMANDS, SHOE_EVENTS, TABLE_COMMANDS, TABLE_EVENTS, TOPIC_OWNERS
from services.shared.platform.consumer.intake import (
    MAX_POSITION,
    MESSAGES_PER_NOTIFICATION,
    Headers,
    UntrustedHeaders,
    offset_tracking_name,
    relayed_position,
    relayed_tracking_name,
)


def position_of(
    logical_topic: str,
    partition: int,
    offset: int,
    headers: Headers,
    *,
    topic: str | None = None,
    cluster_id: str | None = None,
    topic_id: str | None = None,
) -> Tracking:
    """The tracking name and position of a record, as the consumer makes them (intake.py:
    ``PartitionNames.name`` and ``RecordIntake.sort``)."""
    owner = TOPIC_OWNERS.get(logical_topic)
    if owner is not None:
        name = relayed_tracking_name(owner, logical_topic, partition)
        return Tracking(name, relayed_position(headers, owner))
    name = offset_tracking_name(cluster_id, topic or logical_topic, partition, topic_id)
    return Tracking(name, offset + 1)


def relayed(
    notification: bytes, index: bytes = b"0", source: bytes = b"dealing"
) -> list[tuple[str, bytes | None]]:
    return [
        ("pb-source", source),
        ("pb-notification-id", notification),
        ("pb-message-index", index),
    ]


def test_an_owned_topic_is_tracked_by_its_owners_notifications() -> None:
    tracking = position_of(TABLE_EVENTS, 2, 41, relayed(b"9", b"3"), topic="p." + TABLE_EVENTS)
    # No cluster, prefix or topic id: a relayed position counts the upstream store's log.
    assert tracking.application_name == "dealing:punto-banco.table-events:2"
    assert tracking.notification_id == 9 * MESSAGES_PER_NOTIFICATION + 3
    shoe = position_of(SHOE_EVENTS, 0, 0, relayed(b"1", source=b"shoe"))
    assert shoe.application_name == f"shoe:{SHOE_EVENTS}:0"


def test_other_topics_are_tracked_by_offset_under_cluster_topic_and_topic_id() -> None:
    tracking = position_of(
        TABLE_COMMANDS,
        1,
        41,
        relayed(b"9"),  # ignored: anyone may write a command topic
        topic="p2." + TABLE_COMMANDS,
        cluster_id="k1",
        topic_id="Xy-_z",
    )
    assert (tracking.application_name, tracking.notification_id) == (
        f"k1:p2.{TABLE_COMMANDS}:Xy-_z:1",
        42,
    )
    assert offset_tracking_name("k1", "t", 3) == "k1:t:3"  # the name before topic ids
    assert offset_tracking_name(None, "t", 3) == "t:3"


def test_the_overflow_attack_on_bet_commands_is_just_an_offset() -> None:
    tracking = position_of(BET_COMMANDS, 0, 7, relayed(b"99999999999999999999"))
    assert tracking.notification_id == 8


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        (relayed(b"8000000000000", source=b"evil"), "pb-source is b'evil', but only dealing"),
        (relayed(b"5", source=b"shoe"), "pb-source is b'shoe'"),
        ([], "header pb-source is missing"),
        (relayed(b"5")[:2], "header pb-message-index is missing"),
        ([*relayed(b"5"), ("pb-source", b"dealing")], "pb-source appears more than once"),
        ([*relayed(b"5"), ("pb-message-index", b"1")], "pb-message-index appears more than once"),
        ([("pb-source", None), *relayed(b"5")[1:]], "header pb-source has no value"),
        (relayed(b"99999999999999999999"), "not a decimal number (1-15 digits, from 1"),
        (relayed(b"1234567890123456"), "not a decimal number"),  # 16 digits
        (relayed(b"0"), "not a decimal number (1-15 digits, from 1"),
        (relayed(b"007"), "no leading zero"),
        (relayed(b"+7"), "not a decimal number"),
        (relayed(b"\xd9\xa3"), "not a decimal number"),  # ARABIC-INDIC DIGIT THREE
        (relayed(b"7\n"), "not a decimal number"),
        (relayed(b"7", b"1048576"), "is 1048576, not below 1048576"),
        (relayed(b"7", b"12345678"), "not a decimal number (1-7 digits"),
        (relayed(b"7", b"-1"), "not a decimal number"),
        (relayed(str(2**43).encode()), "does not fit 63 bits"),
        (relayed(b"9" * 15), "does not fit 63 bits"),
    ],
)
def test_untrusted_relay_headers_on_an_owned_topic_are_refused(
    headers: list[tuple[str, bytes | None]], reason: str
) -> None:
    with pytest.raises(UntrustedHeaders) as refused:
        position_of(TABLE_EVENTS, 0, 0, headers)
    assert reason in refused.value.reason


def test_positions_reach_exactly_the_largest_63_bit_integer() -> None:
    top = MAX_POSITION >> 20
    assert relayed_position(relayed(str(top).encode(), b"1048575"), "dealing") == MAX_POSITION
    assert relayed_position(relayed(b"1"), "dealing") == MESSAGES_PER_NOTIFICATION
    with pytest.raises(UntrustedHeaders):
        relayed_position(relayed(str(top + 1).encode()), "dealing")


def test_a_long_refused_value_is_quoted_short() -> None:
    with pytest.raises(UntrustedHeaders) as refused:
        relayed_position(relayed(b"x" * 10_000), "dealing")
    assert len(refused.value.reason) < 200


HEADER_NAMES = st.sampled_from(["pb-source", "pb-notification-id", "pb-message-index", "other"])
HEADER_VALUES = st.one_of(
    st.none(),
    st.binary(max_size=24),
    st.integers(min_value=-5, max_value=2**70).map(lambda n: str(n).encode()),
    st.sampled_from([b"dealing", b"shoe", b"settlement", b"evil"]),
)


@given(
    topic=st.sampled_from(sorted({*TOPIC_OWNERS, TABLE_COMMANDS, BET_COMMANDS})),
    headers=st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=8),
    offset=st.integers(min_value=0, max_value=2**63 - 2),
)
def test_any_headers_give_a_storable_position_or_a_refusal(
    topic: str, headers: list[tuple[str, bytes | None]], offset: int
) -> None:
    try:
        tracking = position_of(topic, 0, offset, headers, cluster_id="k", topic_id="i")
    except UntrustedHeaders as refused:
        assert topic in TOPIC_OWNERS and refused.reason
        return
    assert 1 <= tracking.notification_id <= MAX_POSITION
    owner = TOPIC_OWNERS.get(topic)
    if owner is None:
        assert tracking.notification_id == offset + 1
    else:
        assert tracking.application_name == f"{owner}:{topic}:0"
        assert (b"pb-source", owner.encode()) in [(k.encode(), v) for k, v in headers]
