"""The bridge records each device read once: duplicates counted, gaps recorded, and each
recorded read published as one StudioRead, keyed by table id."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from contracts import STUDIO_READS, StudioRead, partition_key, topic_for
from services.shared.platform.relay import SIGNED_TOPICS
from services.shared.platform.settings import Settings, SettingsError
from services.shared.rules import Card
from services.studio.protocol import (
    Button,
    ButtonPressed,
    CardRead,
    Event,
    Signal,
    Signalled,
    parse,
)
from services.studio_bridge.application import BridgeApplication
from services.studio_bridge.device import DeviceLink
from services.studio_bridge.domain import (
    MAX_OPEN_GAPS,
    MAX_REPEAT_BEHIND,
    MAX_SKIP_AHEAD,
    DeviceReads,
    Taken,
    device_uuid,
)
from services.studio_bridge.messages import to_messages
from services.studio_bridge.service import device_link

TABLE = "studio-1"
DEVICE = "shoe-1"
WHEN = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def bridge() -> BridgeApplication:
    return BridgeApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})


def card(seq: int, code: str = "TD") -> CardRead:
    return CardRead(DEVICE, seq, Card(code[0], code[1]))


def heartbeat(seq: int) -> Signalled:
    return Signalled(DEVICE, seq, Signal.HEARTBEAT)


def published(app: BridgeApplication) -> list[StudioRead]:
    """What the relay would publish of everything recorded, in order."""
    messages: list[StudioRead] = []
    for notification in app.recorder.select_notifications(1, 1000):
        for message in to_messages(app.mapper.to_domain_event(notification)):
            assert isinstance(message, StudioRead)
            messages.append(message)
    return messages


def take_all(app: BridgeApplication, *events: Event) -> list[Taken]:
    return [app.take(TABLE, each, WHEN) for each in events]


def test_each_read_becomes_one_studio_read_in_the_devices_order() -> None:
    app = bridge()
    taken = take_all(
        app,
        Signalled(DEVICE, 1, Signal.SHOE_IN),
        card(2, "9H"),
        ButtonPressed(DEVICE, 3, Button.RESCAN),
        Signalled(DEVICE, 4, Signal.CUT_CARD),
    )
    assert taken == [Taken.RECORDED] * 4
    reads = published(app)
    assert [(r.seq, r.what, r.card, r.button) for r in reads] == [
        (1, "shoe-in", None, None),
        (2, "card", "9H", None),
        (3, "button", None, "RESCAN"),
        (4, "cut-card", None, None),
    ]
    assert {(r.table_id, r.device, r.read_at) for r in reads} == {(TABLE, DEVICE, WHEN)}
    assert {partition_key(r) for r in reads} == {TABLE.encode()}
    assert topic_for(reads[0]) == STUDIO_READS and STUDIO_READS in SIGNED_TOPICS


def test_a_read_published_again_is_the_same_message() -> None:
    app = bridge()
    app.take(TABLE, card(1), WHEN)
    assert published(app) == published(app)  # event ids derive from the stored event


def test_a_seq_recorded_already_is_a_duplicate_and_recorded_once() -> None:
    app = bridge()
    assert take_all(app, card(1), card(2), card(2), card(1)) == [
        Taken.RECORDED,
        Taken.RECORDED,
        Taken.DUPLICATE,
        Taken.DUPLICATE,
    ]
    assert [r.seq for r in published(app)] == [1, 2]


def test_a_count_far_behind_is_a_device_counting_again_and_nothing_is_recorded() -> None:
    app = bridge()
    far = MAX_REPEAT_BEHIND + 10
    assert take_all(app, card(far), card(far - MAX_REPEAT_BEHIND), card(1), card(2)) == [
        Taken.RECORDED,
        Taken.DUPLICATE,  # within reach of a resend after a reconnect
        Taken.BACKWARDS,  # a power cycle: seq 1 again
        Taken.BACKWARDS,
    ]
    assert [read.seq for read in published(app)] == [far]


def test_a_seq_far_ahead_is_refused_and_the_device_goes_on() -> None:
    """A garbled line (seq 2^63 - 1) is not taken: its gap would have made every later read
    of the device a backwards one."""
    app = bridge()
    taken = take_all(
        app,
        card(1),
        card(2**63 - 1),
        Signalled(DEVICE, 2 + MAX_SKIP_AHEAD, Signal.HEARTBEAT),
        card(2),
        card(2 + MAX_SKIP_AHEAD, "3C"),
    )
    assert taken == [Taken.RECORDED, Taken.AHEAD, Taken.AHEAD, Taken.RECORDED, Taken.RECORDED]
    first = bridge()  # a garbled first line does not set where the device starts
    assert take_all(first, card(2**63 - 1), card(1)) == [Taken.AHEAD, Taken.RECORDED]
    assert [(r.what, r.seq, r.last_seq) for r in published(app)] == [
        ("card", 1, None),
        ("card", 2, None),
        ("gap", 3, 1 + MAX_SKIP_AHEAD),
        ("card", 2 + MAX_SKIP_AHEAD, None),
    ]


def test_skipped_seqs_are_recorded_as_a_gap_before_the_read_after_them() -> None:
    app = bridge()
    take_all(app, card(1), card(5, "2C"))
    assert [(r.what, r.seq, r.last_seq) for r in published(app)] == [
        ("card", 1, None),
        ("gap", 2, 4),
        ("card", 5, None),
    ]


def test_a_late_read_fills_its_gap_once() -> None:
    app = bridge()
    taken = take_all(app, card(1), card(3, "3C"), card(2, "2C"), card(2, "2C"), card(4, "4C"))
    assert taken == [Taken.RECORDED] * 3 + [Taken.DUPLICATE, Taken.RECORDED]
    assert [(r.what, r.seq) for r in published(app)] == [
        ("card", 1),
        ("gap", 2),
        ("card", 3),
        ("card", 2),
        ("card", 4),
    ]
    reads = app.reads_of(TABLE, DEVICE)
    assert reads is not None and reads.gaps == [] and reads.highest == 4


def test_a_heartbeat_shows_a_lost_last_read_and_is_not_recorded_itself() -> None:
    app = bridge()
    assert take_all(app, card(1), heartbeat(1), heartbeat(3), heartbeat(3)) == [
        Taken.RECORDED,
        Taken.HEARTBEAT,
        Taken.HEARTBEAT,
        Taken.HEARTBEAT,
    ]
    assert [(r.what, r.seq, r.last_seq) for r in published(app)] == [
        ("card", 1, None),
        ("gap", 2, 3),
    ]
    assert app.take(TABLE, card(3), WHEN) is Taken.RECORDED  # it arrives after all


def test_the_first_read_sets_where_the_device_starts() -> None:
    app = bridge()
    take_all(app, heartbeat(40), card(41))
    assert [(r.what, r.seq) for r in published(app)] == [("card", 41)]


def test_the_oldest_open_gaps_are_forgotten_beyond_the_bound() -> None:
    app = bridge()
    take_all(app, *(card(seq) for seq in range(1, 2 * MAX_OPEN_GAPS + 4, 2)))
    reads = app.reads_of(TABLE, DEVICE)
    assert reads is not None and len(reads.gaps) == MAX_OPEN_GAPS
    assert app.take(TABLE, card(2), WHEN) is Taken.DUPLICATE  # its gap was forgotten
    assert app.take(TABLE, card(2 * MAX_OPEN_GAPS + 2), WHEN) is Taken.RECORDED


def test_a_read_of_another_device_is_refused() -> None:
    app = bridge()
    app.take(TABLE, card(1), WHEN)
    reads = app.reads_of(TABLE, DEVICE)
    assert reads is not None
    with pytest.raises(ValueError, match="is not device"):
        reads.take(CardRead("shoe-2", 2, Card("A", "S")), WHEN)


@pytest.mark.parametrize(
    "fields",
    [
        {"device": "shoe 1"},
        {"device": "x" * 33},
        {"seq": -1},
        {"seq": 2**63},
        {"what": "heartbeat"},
        {"card": "1D"},
        {"button": "PANIC"},
        {"table_id": "t" * 65},
    ],
)
def test_a_studio_read_out_of_bounds_is_refused(fields: dict[str, Any]) -> None:
    valid = {"table_id": TABLE, "device": DEVICE, "seq": 1, "what": "card", "card": "TD"}
    StudioRead(**valid, read_at=WHEN)
    with pytest.raises(ValidationError):
        StudioRead(**{**valid, **fields}, read_at=WHEN)


class FakeContext:
    """What DeviceLink needs of a ServiceContext: the app, called in line."""

    def __init__(self, app: BridgeApplication) -> None:
        self.app = app
        self.stopping = asyncio.Event()

    async def call(self, fn: Any, /, *args: Any) -> Any:
        return fn(*args)


async def test_the_link_counts_each_line_by_what_became_of_it() -> None:
    app = bridge()
    link = DeviceLink(TABLE, DEVICE, "127.0.0.1", 1)
    lines = [
        "PB1 shoe-1 1 CARD TD",
        "PB1 shoe-1 1 CARD TD",
        "PB1 shoe-2 2 CARD 9H",
        "PB1 shoe-1 two CARD 9H",
        "PB1 shoe-1 1 HEARTBEAT",
    ]
    for line in lines:
        await link._take(FakeContext(app), app, line)  # type: ignore[arg-type]
    assert dict(link.counts) == {
        "recorded": 1,
        "duplicate": 1,
        "wrong-device": 1,
        "malformed": 1,
        "heartbeat": 1,
    }
    assert [r.seq for r in published(app)] == [parse(lines[0]).seq]


def test_the_bridge_needs_its_table_and_its_devices_port() -> None:
    with pytest.raises(SettingsError, match="PB_STUDIO_TABLE"):
        device_link(Settings.from_env("studio-bridge", {"PB_STUDIO_DEVICE_PORT": "7000"}))
    with pytest.raises(SettingsError, match="PB_STUDIO_DEVICE_PORT"):
        device_link(Settings.from_env("studio-bridge", {"PB_STUDIO_TABLE": TABLE}))
    link = device_link(
        Settings.from_env(
            "studio-bridge",
            {"PB_STUDIO_TABLE": TABLE, "PB_STUDIO_DEVICE_PORT": "7000", "PB_STUDIO_DEVICE": "s-2"},
        )
    )
    assert (link.table_id, link.device, link.host, link.port) == (TABLE, "s-2", "127.0.0.1", 7000)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PB_STUDIO_TABLE", "table 1"),
        ("PB_STUDIO_DEVICE", "shoe/1"),
        ("PB_STUDIO_DEVICE_PORT", "65536"),
        ("PB_STUDIO_SILENCE", "0"),
    ],
)
def test_a_bad_studio_setting_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env("studio-bridge", {variable: value})


class FakeWriter:
    def close(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass


async def test_a_stopping_link_takes_the_chunk_it_received_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service stops while the first line of a chunk is being taken: the rest of the chunk
    is taken before the link lets go (never lost to the stop)."""
    app = bridge()
    reader = asyncio.StreamReader()
    reader.feed_data(b"PB1 shoe-1 1 CARD TD\nPB1 shoe-1 2 CARD 9H\nPB1 shoe-1 3 CARD 2C\n")

    async def connect(host: str, port: int) -> tuple[asyncio.StreamReader, FakeWriter]:
        return reader, FakeWriter()

    monkeypatch.setattr("services.studio_bridge.device.asyncio.open_connection", connect)
    ctx = FakeContext(app)

    async def call_then_stop(fn: Any, /, *args: Any) -> Any:
        ctx.stopping.set()  # the service stops meanwhile
        await asyncio.sleep(0)
        return fn(*args)

    ctx.call = call_then_stop  # type: ignore[method-assign]
    link = DeviceLink(TABLE, DEVICE, "127.0.0.1", 1)
    await asyncio.wait_for(link.run(ctx), 5)  # type: ignore[arg-type]
    assert [r.seq for r in published(app)] == [1, 2, 3]
    assert link.counts == {"recorded": 3}


def test_a_device_with_many_reads_is_read_back_from_a_snapshot_with_its_gaps() -> None:
    app = bridge()
    for seq in range(1, 1_202):
        if seq % 100 != 0:  # every hundredth read lost: a gap each
            app.take(TABLE, card(seq), WHEN)
    snapshots = app.snapshots
    assert snapshots is not None
    (latest,) = snapshots.get(device_uuid(TABLE, "shoe-1"), desc=True, limit=1)
    restored = latest.mutate(None)  # as a restarted bridge reads it back
    assert isinstance(restored, DeviceReads) and restored.version == 1_000
    assert [tuple(gap) for gap in restored.gaps] == [(n, n) for n in range(100, 1_000, 100)]
    assert restored.take(card(500), WHEN) is Taken.RECORDED  # into a gap, as before
    reads = app.reads_of(TABLE, "shoe-1")
    assert reads is not None and reads.highest == 1_201
    assert [tuple(gap) for gap in reads.gaps] == [(n, n) for n in range(100, 1_201, 100)]
    assert app.take(TABLE, card(700), WHEN) is Taken.RECORDED  # late into its gap
