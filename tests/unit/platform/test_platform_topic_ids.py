"""The Metadata v12 request for topic ids, encoded and decoded without a broker."""

from io import BytesIO

import pytest

from services.shared.platform.consumer.topic_ids import (
    MetadataRequest_v12,
    MetadataResponse_v12,
    TopicIdsRequest,
    read_answer,
    topic_id_text,
)


def test_the_request_is_flexible_metadata_v12_when_the_broker_speaks_it() -> None:
    struct = TopicIdsRequest(["t"]).prepare({3: (0, 13)})
    assert isinstance(struct, MetadataRequest_v12)
    header = struct.build_request_header(correlation_id=7, client_id="c")
    # api key 3, version 12, correlation id 7, client id "c" (int16 length), no tagged fields
    assert header.encode() == bytes.fromhex("0003 000c 00000007 0001 63 00")
    # topics: compact array of 1 (varint 2) [zero uuid, compact string "t", no tags],
    # allow_auto_topic_creation false, include_topic_authorized_operations false, no tags
    assert struct.encode() == bytes([2]) + bytes(16) + b"\x02t\x00" + b"\x00\x00\x00"


def test_a_broker_without_metadata_v12_is_refused() -> None:
    with pytest.raises(NotImplementedError):
        TopicIdsRequest(["t"]).prepare({3: (0, 11)})


def test_a_response_gives_the_cluster_id_and_the_ids_of_the_topics_that_exist() -> None:
    known = (0x0001020304050607, 0x08090A0B0C0D0E0F)  # the 16 bytes 00 01 .. 0f
    partition = (0, 0, 1, 0, [1], [1], [], {})
    body = MetadataResponse_v12.SCHEMA.encode(
        [
            0,
            [(1, "localhost", 9092, None, {})],
            "Ck-ED9wUTRiWPyEoY0gOgw",
            1,
            [
                (0, "p.punto-banco.table-commands", known, False, [partition], -2147483648, {}),
                (3, "p.gone", (0, 0), False, [], -2147483648, {}),  # UNKNOWN_TOPIC
            ],
            {},
        ]
    )
    answer = read_answer(MetadataResponse_v12.decode(BytesIO(body)))
    assert answer.cluster_id == "Ck-ED9wUTRiWPyEoY0gOgw"
    assert answer.topic_ids == {"p.punto-banco.table-commands": "AAECAwQFBgcICQoLDA0ODw"}


def test_a_topic_id_is_written_as_kafka_writes_it() -> None:
    # Kafka's Uuid(0, 1), the id of its __cluster_metadata topic, prints as below.
    assert topic_id_text((0, 1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert topic_id_text((-1, -1)) == "_____________________w"  # the 16 bytes ff
