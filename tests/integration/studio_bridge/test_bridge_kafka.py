"""The simulated shoe -> the device bridge -> real Kafka (its store on SQLite or PostgreSQL):
every card read arrives once, in the device's order, keyed by table id and signed by the
bridge; a doubled read is dropped, a dropped one reported as a gap, an out-of-order one fills
its gap; across a disconnect (the bridge reconnects) and a restart of the bridge (nothing
published twice)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts import HOUSE, STUDIO_READS, StudioRead, decode
from services.dev.infra.kafka_principals import BrokerPrincipals
from services.dev.infra.processes import run_async
from services.shared.platform.kafka import (
    INDEX_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    cluster_id,
)
from services.shared.platform.security import Where, load_keyring, verify
from services.studio.protocol import CardRead, Signalled
from services.studio.simulator import Device, Dropped, Fault, LoopbackServer
from services.studio_bridge.service import BridgeService, build_service
from tests import kafka_logins
from tests.integration.platform.kafka_tools import Received, as_admin, read_topic, settings_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TABLE = "studio-1"
BRIDGE = "studio-bridge"
DOUBLED, DROPPED, DISCONNECT, LATE, UNREADABLE = 3, 7, 12, 18, 24  # card indexes in the shoe
PACE = 0.03  # seconds between the device's lines


def admit_bridge(bootstrap: str) -> None:
    """The bridge's own principal on the session's authenticating broker (a broker started
    before the principal existed has no credentials for it yet)."""
    home = kafka_logins.logins().home
    if home is None:
        return
    principals = BrokerPrincipals(home)
    if principals.credentials.read(BRIDGE) is None:
        run_async(principals.admit(bootstrap, {BRIDGE: BRIDGE}, (HOUSE,), acls=False))


async def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def recorded_up_to(bridge: BridgeService, seq: int) -> Callable[[], bool]:
    def check() -> bool:
        reads = bridge.app.reads_of(TABLE, "shoe-1")
        return reads is not None and reads.highest is not None and reads.highest >= seq

    return check


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_every_card_read_arrives_once_in_order_signed_across_faults_and_a_restart(
    tmp_path: Path, kafka_bootstrap: str, request: pytest.FixtureRequest, store: str
) -> None:
    postgres = request.getfixturevalue("postgres_env") if store == "postgres" else None
    admit_bridge(kafka_bootstrap)
    faults = {
        DOUBLED: Fault.DOUBLED,
        DROPPED: Fault.DROPPED,
        DISCONNECT: Fault.DISCONNECT,
        LATE: Fault.OUT_OF_ORDER,
        UNREADABLE: Fault.UNREADABLE,
    }
    device = Device(decks=1, faults=faults, source=random.Random(24))
    made = [step.event if isinstance(step, Dropped) else step for step in device.steps]
    cards = {e.seq: e.card.code for e in made if isinstance(e, CardRead)}
    dropped = next(step.event.seq for step in device.steps if isinstance(step, Dropped))
    last_seq = max(e.seq for e in made if isinstance(e, CardRead | Signalled))
    counts: dict[str, dict[str, int]] = {}
    async with LoopbackServer(device, pace=PACE, coup_pause=0.0, heartbeat=0.5) as server:
        settings = settings_for(
            BRIDGE,
            kafka_bootstrap,
            data_dir=tmp_path,
            postgres_env=postgres,
            studio_table=TABLE,
            studio_device_port=server.port,
            studio_silence=10.0,
        )
        async with build_service(settings) as first:
            await first.wait_ready()
            await until(recorded_up_to(first, 40), "the first 40 lines")
            # PB1 has no acknowledgement: a line in flight when the bridge stops is lost (a
            # gap). The dealer pauses, so what this restart loses is nothing: the line due
            # within PACE is sent (the device and this test share one event loop's timers),
            # then none until the bridge has taken every line sent.
            server.pace = 3600.0
            await asyncio.sleep(2 * PACE)
            await until(lambda: recorded_up_to(first, device.latest_seq)(), "the lines sent")
            counts["first"] = dict(first.link.counts)
            connections = first.link.connections
        server.pace = PACE
        async with build_service(settings) as second:  # goes on from the relay's position
            await second.wait_ready()
            await until(recorded_up_to(second, last_seq), "the whole shoe")
            counts["second"] = dict(second.link.counts)

    def shoe_out(records: list[Received]) -> bool:
        return any(b'"shoe-out"' in record.value for record in records)

    records = await read_topic(settings, STUDIO_READS, shoe_out)
    reads: list[StudioRead] = []
    for record in records:
        read = decode(STUDIO_READS, record.value)
        assert isinstance(read, StudioRead)
        reads.append(read)

    # Once: no message twice (the restart resumed from the relay's position), no seq twice.
    assert len({read.event_id for read in reads}) == len(reads)
    seqs = [(read.what, read.seq) for read in reads]
    assert len(set(seqs)) == len(seqs)
    # Every card read, in the device's order; the dropped one is a gap, the late one fills its.
    got = [(read.seq, read.card) for read in reads if read.what == "card"]
    assert dict(got) == {seq: code for seq, code in cards.items() if seq != dropped}
    order = [seq for seq, _ in got]
    inversions = [(a, b) for a, b in itertools.pairwise(order) if a > b]
    assert len(inversions) == 1
    late = inversions[0][1]
    assert inversions[0] == (late + 1, late)  # the late card came right after the next one
    gaps = [(read.seq, read.last_seq) for read in reads if read.what == "gap"]
    assert (dropped, dropped) in gaps
    assert (late, late) in gaps
    assert len(gaps) == 2
    assert [read.what for read in reads if read.what.startswith("shoe")] == ["shoe-in", "shoe-out"]
    assert any(read.what == "button" and read.button == "RESCAN" for read in reads)
    # The doubled read was counted, not recorded twice; the disconnect was reconnected.
    assert counts["first"].get("duplicate", 0) + counts["second"].get("duplicate", 0) == 1
    assert connections >= 2
    assert not {"malformed", "wrong-device"} & {*counts["first"], *counts["second"]}

    # Keyed by table id, signed by the bridge's key for where each record is.
    keyring = load_keyring(settings)
    cluster = await cluster_id(as_admin(settings))
    for record in records:
        assert record.key == TABLE.encode()
        where = Where(cluster, record.topic, record.partition)
        notification = int(record.headers[NOTIFICATION_HEADER])
        index = int(record.headers.get(INDEX_HEADER, b"0"))
        refused = verify(
            keyring,
            BRIDGE,
            where,
            record.key,
            record.value,
            notification,
            index,
            record.headers.get(SIGNATURE_HEADER),
        )
        assert refused is None, refused
