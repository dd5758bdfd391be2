"""PB1: every event round-trips through its one spelling, every malformed line is refused with
its reason, and the line decoder never holds more than one line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.rules import ALL_CARDS, Card
from services.studio.protocol import (
    MAX_LINE_BYTES,
    MAX_SEQ,
    Button,
    ButtonPressed,
    CardRead,
    Event,
    LineDecoder,
    ProtocolError,
    Reason,
    Signal,
    Signalled,
    format,
    parse,
)

devices = st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True)
seqs = st.integers(0, MAX_SEQ)
events = st.one_of(
    st.builds(CardRead, devices, seqs, st.sampled_from(ALL_CARDS)),
    st.builds(ButtonPressed, devices, seqs, st.sampled_from(Button)),
    st.builds(Signalled, devices, seqs, st.sampled_from(Signal)),
)


@given(events)
def test_every_event_round_trips_through_one_line_of_at_most_80_bytes(event: Event) -> None:
    line = format(event)
    assert line.endswith("\n") and line.isascii() and len(line) <= MAX_LINE_BYTES
    assert parse(line) == event
    assert parse(line.removesuffix("\n")) == event
    assert format(parse(line)) == line


@pytest.mark.parametrize(
    ("line", "event"),
    [
        ("PB1 shoe-1 7 CARD TD", CardRead("shoe-1", 7, Card("T", "D"))),
        ("PB1 a 0 BUTTON SUPERVISOR", ButtonPressed("a", 0, Button.SUPERVISOR)),
        ("PB1 Table_9 12 CUT-CARD", Signalled("Table_9", 12, Signal.CUT_CARD)),
        ("PB1 a 9223372036854775807 HEARTBEAT", Signalled("a", MAX_SEQ, Signal.HEARTBEAT)),
    ],
)
def test_a_line_reads_as_its_event(line: str, event: Event) -> None:
    assert parse(line + "\n") == event


MALFORMED = [
    ("PB1 a 1 CARD " + "A" * 70, Reason.TOO_LONG),
    ("PB1 a 1 CARD AS\r", Reason.BAD_CHARACTER),
    ("PB1 a 1 CARD \u00c4S", Reason.BAD_CHARACTER),
    ("PB1\ta 1 HEARTBEAT", Reason.BAD_CHARACTER),
    ("", Reason.MISSING_FIELD),
    ("PB1 a 1", Reason.MISSING_FIELD),
    ("PB1 a 1 CARD", Reason.MISSING_FIELD),
    ("PB1 a 1 BUTTON", Reason.MISSING_FIELD),
    ("PB1 a 1 SHOE-IN now", Reason.EXTRA_FIELD),
    ("PB1 a 1 CARD AS KD", Reason.EXTRA_FIELD),
    ("PB1 a 1 HEARTBEAT ", Reason.EXTRA_FIELD),
    ("PB2 a 1 HEARTBEAT", Reason.BAD_VERSION),
    ("pb1 a 1 HEARTBEAT", Reason.BAD_VERSION),
    (" PB1 a 1 HEARTBEAT", Reason.BAD_VERSION),
    ("PB1 shoe.1 1 HEARTBEAT", Reason.BAD_DEVICE),
    ("PB1 " + "d" * 33 + " 1 HEARTBEAT", Reason.BAD_DEVICE),
    ("PB1  1 HEARTBEAT", Reason.BAD_DEVICE),
    ("PB1 a -1 HEARTBEAT", Reason.BAD_SEQUENCE),
    ("PB1 a 01 HEARTBEAT", Reason.BAD_SEQUENCE),
    ("PB1 a 1e3 HEARTBEAT", Reason.BAD_SEQUENCE),
    ("PB1 a 9223372036854775808 HEARTBEAT", Reason.BAD_SEQUENCE),
    ("PB1 a 99999999999999999999 HEARTBEAT", Reason.BAD_SEQUENCE),
    ("PB1 a 1 DEAL", Reason.UNKNOWN_EVENT),
    ("PB1 a 1 heartbeat", Reason.UNKNOWN_EVENT),
    ("PB1 a 1 CARD 10S", Reason.BAD_CARD),
    ("PB1 a 1 CARD as", Reason.BAD_CARD),
    ("PB1 a 1 CARD 1S", Reason.BAD_CARD),
    ("PB1 a 1 CARD AX", Reason.BAD_CARD),
    ("PB1 a 1 BUTTON PANIC", Reason.BAD_BUTTON),
    ("PB1 a 1 BUTTON confirm", Reason.BAD_BUTTON),
]


@pytest.mark.parametrize(("line", "reason"), MALFORMED)
def test_a_malformed_line_is_refused_with_its_reason(line: str, reason: Reason) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse(line)
    assert refused.value.reason is reason
    assert str(refused.value).startswith(f"{reason}: ")


def test_every_reason_but_truncated_has_a_malformed_line() -> None:
    assert {reason for _, reason in MALFORMED} == set(Reason) - {Reason.TRUNCATED}


@given(st.text(max_size=100))
def test_any_text_parses_or_is_refused_with_a_reason(text: str) -> None:
    try:
        event = parse(text)
    except ProtocolError as refused:
        assert refused.reason in set(Reason)
    else:
        assert format(event) == text.removesuffix("\n") + "\n"


def test_an_event_refuses_a_bad_device_or_sequence() -> None:
    with pytest.raises(ProtocolError, match="bad-device"):
        CardRead("no spaces", 1, ALL_CARDS[0])
    with pytest.raises(ProtocolError, match="bad-sequence"):
        Signalled("a", MAX_SEQ + 1, Signal.HEARTBEAT)
    with pytest.raises(ProtocolError, match="bad-sequence"):
        Signalled("a", -1, Signal.HEARTBEAT)
    with pytest.raises(TypeError, match="not an event of PB1"):
        format(Event("a", 1))


def test_the_decoder_splits_lines_across_chunks() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b"PB1 a 1 SHO") == []
    assert decoder.feed(b"E-IN\nPB1 a 2 HEART") == ["PB1 a 1 SHOE-IN"]
    assert decoder.feed(b"BEAT\n\n") == ["PB1 a 2 HEARTBEAT", ""]
    assert decoder.close() is None


def test_the_decoder_takes_a_line_of_exactly_80_bytes_and_refuses_81() -> None:
    longest, too_long = b"x" * (MAX_LINE_BYTES - 1), b"y" * MAX_LINE_BYTES
    decoder = LineDecoder()
    [line, refused, after] = decoder.feed(longest + b"\n" + too_long + b"\nPB1 a 1 SHOE-IN\n")
    assert line == longest.decode()
    assert isinstance(refused, ProtocolError) and refused.reason is Reason.TOO_LONG
    assert after == "PB1 a 1 SHOE-IN"


def test_the_decoder_holds_at_most_one_line_of_an_endless_line() -> None:
    decoder = LineDecoder()
    [refused] = decoder.feed(b"z" * 1000)
    assert isinstance(refused, ProtocolError) and refused.reason is Reason.TOO_LONG
    for _ in range(1000):
        assert decoder.feed(b"z" * 1000) == []  # skipped, not buffered, not refused again
        assert len(decoder._pending) <= MAX_LINE_BYTES
    assert decoder.feed(b"zz\nPB1 a 3 CUT-CARD\n") == ["PB1 a 3 CUT-CARD"]


def test_the_decoder_refuses_non_ascii_and_an_unterminated_end() -> None:
    decoder = LineDecoder()
    [refused, line] = decoder.feed(b"PB1 a 1 CARD \xc3\x84S\nPB1 a 2 SHOE-OUT\nPB1 a 3")
    assert isinstance(refused, ProtocolError) and refused.reason is Reason.BAD_CHARACTER
    assert line == "PB1 a 2 SHOE-OUT"
    truncated = decoder.close()
    assert truncated is not None and truncated.reason is Reason.TRUNCATED
    assert decoder.close() is None


def test_an_event_built_by_an_adapter_is_checked_like_a_parsed_one() -> None:
    """format() writes what it is given: an event of the wrong types would be a forged line
    (a button name with a newline is a second, injected read)."""
    forged: list[tuple[type[Event], object, object, Reason]] = [
        (Signalled, True, Signal.HEARTBEAT, Reason.BAD_SEQUENCE),
        (ButtonPressed, 1, "CONFIRM\nPB1 a 2 CARD AS", Reason.BAD_BUTTON),
        (Signalled, 1, "HEARTBEAT", Reason.UNKNOWN_EVENT),
        (CardRead, 1, "AS", Reason.BAD_CARD),
    ]
    for kind, seq, argument, reason in forged:
        with pytest.raises(ProtocolError) as refused:
            kind("a", seq, argument)  # type: ignore[arg-type]
        assert refused.value.reason is reason
