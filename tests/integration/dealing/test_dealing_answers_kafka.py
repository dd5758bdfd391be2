"""Each reader gets only what is its own, on the broker's real ACLs (issue 20, item 12).

Dealing answers a refused table command on command-events, which the casino's staff
(``operator``, ``supervisor``) read and no bettors' gateway may; a gateway's table-events carry
the tables' public facts only, never a refusal's text (a void's names a supervisor's key); and
the house's own topics (refusals, books, shoes) the broker refuses a gateway.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from contracts import (
    BOOK_EVENTS,
    COMMAND_EVENTS,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    CommandRejected,
    TableOpened,
    decode,
)
from services.dealing.service import build_service as build_dealing
from tests import kafka_logins
from tests.integration.platform.kafka_tools import (
    Received,
    read_topic,
    refuse_undescribed,
    send_messages,
    settings_for,
)
from tests.integration.settlement.test_settlement_kafka import table_command
from tests.supervisors import supervisor

pytestmark = [pytest.mark.kafka]


async def test_a_refused_void_reaches_the_casinos_staff_and_no_gateway(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    if not kafka_logins.authenticated():
        pytest.skip("the session's broker does not authenticate: it has no ACLs to hold")
    dealing = settings_for("dealing", kafka_bootstrap, data_dir=tmp_path)
    prefix = dealing.topic_prefix.rstrip(".")
    login = {
        principal: settings_for(
            "dealing", kafka_bootstrap, data_dir=tmp_path, prefix=prefix, principal=principal
        )
        for principal in ("operator", "supervisor", "gateway")
    }
    void = supervisor().void("vip-1", "vip-1.coup-1", "dealer exposed a card")

    def answered(records: list[Received]) -> bool:
        return any(
            isinstance(m := decode(COMMAND_EVENTS, r.value or b""), CommandRejected)
            and m.command_id == void.event_id
            for r in records
        )

    # Dealing without a supervisors keyring: it refuses the void, naming the token's key.
    async with build_dealing(dealing) as host:
        await host.wait_ready()
        await send_messages(
            dealing,
            TABLE_COMMANDS,
            [table_command(betting_window_ms=60_000, cut_card_from_end=14), void],
        )
        for staff in ("supervisor", "operator"):
            answers = await read_topic(login[staff], COMMAND_EVENTS, answered, own_login=True)
            assert answered(answers), staff
    [rejected] = [decode(COMMAND_EVENTS, r.value or b"") for r in answers]
    assert isinstance(rejected, CommandRejected)
    assert supervisor().kid in rejected.message  # what a gateway must not read

    # The gateway reads the table's public life, and no refusal (before: the void's answer,
    # with the supervisor's key id, was on table-events).
    events = await read_topic(
        login["gateway"],
        TABLE_EVENTS,
        lambda records: any(b'"TableOpened"' in (r.value or b"") for r in records),
        own_login=True,
    )
    seen = [decode(TABLE_EVENTS, r.value or b"") for r in events]
    assert any(isinstance(m, TableOpened) for m in seen)
    assert not [m for m in seen if isinstance(m, CommandRejected)]
    assert not [r for r in events if supervisor().kid.encode() in (r.value or b"")]

    # What docs/integrating.md keeps for the house, the broker does not even describe to a
    # gateway. (Dead letters, incidents and seals it may write, as the gateway service does, but
    # not read: test_infra_kafka_auth holds every principal's reads to the matrix.)
    options = kafka_logins.options("gateway")
    for logical in (COMMAND_EVENTS, BOOK_EVENTS, SHOE_EVENTS):
        with pytest.raises(TopicAuthorizationFailedError):
            await refuse_undescribed(kafka_bootstrap, options, dealing.topic(logical))
