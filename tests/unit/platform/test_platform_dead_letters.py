"""Dead letters never fail and stay small, whatever the refused record holds."""

import base64
import hashlib
from typing import Any

from aiokafka import ConsumerRecord
from hypothesis import event, given
from hypothesis import strategies as st

from contracts import DEAD_LETTERS, DeadLetter, decode, encode, partition_key
from contracts.dead_letter import MAX_DEAD_LETTER_PAYLOAD
from services.shared.platform.consumer.dead_letters import dead_letter_for

LIMIT = 512 * 1024
"""A dead letter's encoding stays below this (Kafka's default limit is 1 MB)."""


def record(
    key: Any = b"t1",
    value: Any = b"{}",
    headers: Any = (),
    topic: str = "p.punto-banco.table-events",
    partition: int = 0,
    offset: int = 0,
) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=-1,
        serialized_value_size=-1,
        headers=tuple(headers),
    )


def round_trip(letter: DeadLetter) -> DeadLetter:
    encoded = encode(letter)
    assert len(encoded) < LIMIT
    decoded = decode(DEAD_LETTERS, encoded)
    assert decoded == letter
    assert isinstance(decoded, DeadLetter)
    return decoded


def test_a_value_above_256_kib_is_truncated_and_named_by_its_size_and_digest() -> None:
    value = bytes(range(256)) * 4000  # 1,024,000 bytes
    letter = round_trip(dead_letter_for(record(value=value), "too big", "dealing"))
    assert base64.b64decode(letter.payload_b64) == value[:MAX_DEAD_LETTER_PAYLOAD]
    assert letter.payload_size == len(value)
    assert letter.payload_sha256 == hashlib.sha256(value).hexdigest()
    assert letter.error == f"too big (payload truncated to its first 262144 of {len(value)} bytes)"


def test_a_small_value_is_kept_whole_with_its_size_and_digest() -> None:
    letter = round_trip(dead_letter_for(record(value=b"not json"), "not JSON", "shoe"))
    assert base64.b64decode(letter.payload_b64) == b"not json"
    assert (letter.payload_size, letter.payload_sha256) == (
        8,
        hashlib.sha256(b"not json").hexdigest(),
    )
    assert letter.error == "not JSON"


def test_a_null_value_has_no_payload() -> None:
    letter = round_trip(dead_letter_for(record(value=None), "empty message", "shoe"))
    assert (letter.payload_b64, letter.payload_size, letter.payload_sha256) == ("", None, None)


def test_null_and_non_utf8_header_values_and_keys() -> None:
    headers = [("pb-source", None), ("pb-notification-id", b"\xff\xfe1"), ("\udcff", b"x")]
    letter = round_trip(dead_letter_for(record(key=b"\xfft1", headers=headers), "bad", "shoe"))
    assert letter.headers["pb-source"] is None
    assert letter.headers["pb-notification-id"] == "\ufffd\ufffd1"
    assert letter.headers["?"] == "x"  # a lone surrogate in a name is replaced
    assert letter.key == "\ufffdt1" and letter.table_id is None


def test_hundreds_of_headers_keep_32_and_repeated_names_stay_visible() -> None:
    headers = [("pb-source", b"dealing"), ("pb-source", b"evil")]
    headers += [(f"h{i}", b"v" * 1000) for i in range(300)]
    letter = round_trip(dead_letter_for(record(headers=headers), "repeated", "dealing"))
    assert len(letter.headers) == 32
    assert letter.headers["pb-source"] == "dealing" and letter.headers["pb-source (2)"] == "evil"
    assert all(len(value or "") == 256 for name, value in letter.headers.items() if name[0] == "h")
    assert letter.error == "repeated (302 headers, the first 32 kept)"


def test_a_huge_key_is_cut_and_the_dead_letter_key_stays_small() -> None:
    letter = round_trip(dead_letter_for(record(key=b"k" * 2_000_000), "x", "settlement"))
    assert letter.key == "k" * 256 and letter.table_id is None
    assert partition_key(letter) == b"k" * 256
    table = round_trip(dead_letter_for(record(key=b"t-1"), "x", "settlement"))
    assert (table.table_id, partition_key(table)) == ("t-1", b"t-1")


def test_a_long_error_is_cut_to_2000_characters_keeping_its_notes() -> None:
    letter = round_trip(dead_letter_for(record(value=b"v" * 300_000), "e" * 5000, "shoe"))
    assert len(letter.error) == 2000
    assert letter.error.endswith("... (payload truncated to its first 262144 of 300000 bytes)")


def test_the_worst_record_stays_below_512_kib() -> None:
    # Every text field at its bound, in the character JSON writes longest (\u0001: 6 bytes).
    worst = "\x01" * 1000
    headers = [(worst + str(i), worst.encode()) for i in range(40)]
    letter = dead_letter_for(
        record(key=worst.encode(), value=b"\x01" * 400_000, headers=headers, topic="t" * 249),
        worst * 3,
        "s" * 32,
    )
    assert len(encode(letter)) < LIMIT
    round_trip(letter)


TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=300)


def _repeated(size: int, pattern: bytes) -> bytes:
    return (pattern * (size // len(pattern) + 1))[:size]


BYTES = st.one_of(
    st.binary(max_size=600),
    # large values (around the 256 KiB cut) without drawing megabytes of random data
    st.builds(_repeated, st.integers(200_000, 700_000), st.binary(min_size=1, max_size=8)),
)


@given(
    key=st.one_of(st.none(), BYTES, TEXT),
    value=st.one_of(st.none(), BYTES),
    headers=st.lists(
        st.tuples(st.one_of(TEXT, st.binary(max_size=300)), st.one_of(st.none(), BYTES, TEXT)),
        max_size=60,
    ),
    topic=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=249),
    partition=st.integers(min_value=0, max_value=2**31 - 1),
    offset=st.integers(min_value=0, max_value=2**63 - 1),
    error=st.text(alphabet=st.characters(exclude_categories=()), max_size=3000),
)
def test_any_record_gives_a_valid_dead_letter_below_512_kib(
    key: Any, value: Any, headers: Any, topic: str, partition: int, offset: int, error: str
) -> None:
    event("large value" if value is not None and len(value) > MAX_DEAD_LETTER_PAYLOAD else "small")
    letter = dead_letter_for(
        record(key, value, headers, topic, partition, offset), error, "settlement"
    )
    round_trip(letter)
    if value is not None:
        assert letter.payload_size == len(value)
        assert letter.payload_sha256 == hashlib.sha256(value).hexdigest()
        assert base64.b64decode(letter.payload_b64) == value[:MAX_DEAD_LETTER_PAYLOAD]
    assert len(partition_key(letter)) <= 4 * 256
