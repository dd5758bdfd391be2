"""Commands from outside, end to end: every rejection reason, malformed messages, voids, the cut
card. Real Kafka, the three real services as subprocesses, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from decimal import Decimal

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from contracts import (
    BET_COMMANDS,
    SHOE_COMMANDS,
    TABLE_COMMANDS,
    BetAccepted,
    BetRefunded,
    BetRejected,
    CardDealt,
    CardDrawn,
    CardsBurned,
    CloseBetting,
    CloseTable,
    CommandRejected,
    CoupRefunded,
    CoupResolved,
    CoupSettled,
    CoupVoided,
    CutCardReached,
    DeadLetter,
    PlaceBet,
    ShoeClosed,
    ShoeShuffled,
    TableClosed,
    VoidCoup,
)
from services.dev.demo.processes import LOCAL_SUPERVISOR
from services.dev.demo.system import LocalSystem
from services.dev.infra.kafka_clients import SUPERVISOR
from services.shared.rules.cards import Card
from services.shared.rules.shoe import verify_commitment
from services.tools.admin.supervisors import (
    SupervisorSigner,
)
from services.tools.cli.main import app
from tests.e2e.helpers import (
    answered,
    answers,
    assert_books_clean,
    bet,
    betting_opened,
    open_table,
    place_when_known,
    supervisor,
    wait,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def coup_settled(system: LocalSystem, coup_id: str) -> bool:
    return any(m.coup_id == coup_id for m in system.seen(CoupSettled))


async def close_table(system: LocalSystem, table: str, timeout: float = 60) -> None:
    """CloseTable, and wait for TableClosed: the table closes after its current coup, so close
    betting on each coup as it opens rather than wait out its long window."""
    await system.sender.send_now(CloseTable(table_id=table, reason="test over"))
    hurried: set[str] = set()
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(m.table_id == table for m in system.seen(TableClosed)):
        for opened in betting_opened(system, table):
            if opened.coup_id not in hurried:
                hurried.add(opened.coup_id)
                await system.sender.send_now(CloseBetting(table_id=table, coup_id=opened.coup_id))
        assert asyncio.get_running_loop().time() < deadline, (
            f"no TableClosed for {table} after {timeout:.0f} s\n{system.log_tails(25)}"
        )
        await system.pump(timeout_ms=100)


async def send_all(system: LocalSystem, bets: list[PlaceBet]) -> None:
    for command in bets:
        await system.sender.send(command)
    await system.sender.flush()


@pytest.mark.timeout(180)
async def test_each_rejection_reason_is_answered_with_its_code(system: LocalSystem) -> None:
    # A window long enough for the first bet's round trip (resent while settlement does not know
    # the coup) and the bets after it on a loaded machine; CloseBetting ends it once all are in.
    table = await open_table(system, betting_window_ms=30_000)
    coup = betting_opened(system, table)[0].coup_id
    good = bet(table, coup, "alice", "player", 1000)
    in_window = {
        "NO_SUCH_TABLE": bet(f"ghost-{uuid.uuid4().hex[:8]}", coup, "bob", "player", 1000),
        "NO_SUCH_COUP": bet(table, "no-such-coup", "bob", "player", 1000),
        "BELOW_MINIMUM": bet(table, coup, "bob", "tie", 99),
        "ABOVE_MAXIMUM": bet(table, coup, "bob", "banker", 100_001),
        "OPPOSING_BETS": bet(table, coup, "alice", "banker", 1000),
        "WRONG_CURRENCY": bet(table, coup, "bob", "player", 1000, currency="USD"),
        "INVALID_AMOUNT": bet(table, coup, "bob", "player", Decimal("100.5")),
        "UNKNOWN_BET_TYPE": bet(table, coup, "bob", "dragon", 1000),
        "BET_TYPE_NOT_OFFERED": bet(table, coup, "bob", "dragon_7", 1000),
    }
    bad_amounts = [bet(table, coup, "carol", "tie", amount) for amount in (0, -500)]
    resend = good.model_copy(update={"event_id": uuid.uuid4()})  # same bet, delivered again
    reused = good.model_copy(update={"event_id": uuid.uuid4(), "amount": 2000})
    await place_when_known(system, good)  # settlement knows the coup from here on
    await send_all(system, [*in_window.values(), *bad_amounts, resend, reused])

    everything = [good, *in_window.values(), *bad_amounts]
    await wait(
        system,
        lambda: all(answers(system, b.bet_id) for b in everything),
        60,
        "an answer to every bet",
    )
    await system.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await wait(system, lambda: coup_settled(system, coup), 60, f"{coup} settled")

    late = bet(table, coup, "dave", "player", 1000)
    await system.sender.send_now(late)
    await wait(system, lambda: answers(system, late.bet_id), 30, "an answer to the late bet")
    in_window["BETTING_CLOSED"] = late

    await close_table(system, table)
    # Settlement learns of TableClosed on another topic than the bets: until it has, a bet gets
    # BETTING_CLOSED; then TABLE_CLOSED.
    last_coup = betting_opened(system, table)[-1].coup_id
    for _attempt in range(50):
        after_close = bet(table, last_coup, "erin", "player", 1000)
        await system.sender.send_now(after_close)
        await wait(system, answered(system, after_close.bet_id), 30, "an answer")
        [answer] = answers(system, after_close.bet_id)
        assert isinstance(answer, BetRejected)
        if answer.reason_code == "TABLE_CLOSED":
            break
        assert answer.reason_code == "BETTING_CLOSED"
        await asyncio.sleep(0.2)
    in_window["TABLE_CLOSED"] = after_close

    for code, command in in_window.items():
        [answer] = {m.event_id: m for m in answers(system, command.bet_id)}.values()
        assert isinstance(answer, BetRejected), f"{code}: accepted"
        assert answer.reason_code == code, f"expected {code}, got {answer.reason_code}"
        assert answer.message  # says what was wrong
    for command in bad_amounts:
        rejected = [m for m in answers(system, command.bet_id) if isinstance(m, BetRejected)]
        assert {m.reason_code for m in rejected} == {"INVALID_AMOUNT"}

    # The resend has no second effect; reusing the id with other content is refused.
    accepted = {m.event_id for m in system.seen(BetAccepted) if m.bet_id == good.bet_id}
    assert len(accepted) >= 1
    assert all(m.amount == 1000 for m in system.seen(BetAccepted) if m.bet_id == good.bet_id)
    codes = {m.reason_code for m in system.seen(BetRejected) if m.bet_id == good.bet_id}
    assert codes <= {"DUPLICATE_BET_ID", "NO_SUCH_COUP"}
    assert_books_clean(system.ledger)
    assert system.ledger.summary().bets_settled == 1


def as_json(document: dict[str, object]) -> bytes:
    return json.dumps(document).encode()


MALFORMED: list[tuple[str, bytes, str]] = [
    (TABLE_COMMANDS, b"this is not JSON", "dealing"),
    (TABLE_COMMANDS, as_json({"type": "OpenTable", "table_id": "t1", "decks": "six"}), "dealing"),
    (BET_COMMANDS, b"\xff\xfe{{{", "settlement"),
    # no readable bet id (one that can be read is answered: BetRejected, hostile tests)
    (BET_COMMANDS, as_json({"type": "PlaceBet", "table_id": "t1", "bet_id": ""}), "settlement"),
    (SHOE_COMMANDS, b"[1, 2, 3", "shoe"),
    (SHOE_COMMANDS, as_json({"type": "DrawCards", "table_id": "t1", "count": 99}), "shoe"),
]


@pytest.mark.timeout(180)
async def test_malformed_commands_land_in_the_dead_letter_topic_and_the_services_go_on(
    system: LocalSystem,
) -> None:
    payloads = MALFORMED
    for topic, payload, _ in payloads:
        await system.sender.send_raw(topic, payload, key=b"t1")
    await wait(system, lambda: len(system.seen(DeadLetter)) >= len(payloads), 60, "dead letters")

    letters = system.seen(DeadLetter)
    for topic, payload, service in payloads:
        matching = [d for d in letters if base64.b64decode(d.payload_b64) == payload]
        assert matching, f"no dead letter for {payload!r} on {topic}"
        letter = matching[0]
        assert letter.original_topic.endswith(topic)
        assert letter.service == service
        assert letter.error
        assert letter.key == "t1"

    # ... and every service still serves: a coup is dealt and a bet settled.
    table = await open_table(system, betting_window_ms=3000)
    coup = betting_opened(system, table)[0].coup_id
    good = bet(table, coup, "alice", "banker", 500)
    await place_when_known(system, good)
    await system.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await wait(system, lambda: coup_settled(system, coup), 60, "the coup settled")
    assert isinstance(answers(system, good.bet_id)[-1], BetAccepted)
    assert_books_clean(system.ledger)
    assert system.ledger.summary().bets_settled == 1


def refused_with(system: LocalSystem, command: VoidCoup) -> str | None:
    found = [m for m in system.seen(CommandRejected) if m.command_id == command.event_id]
    return found[0].reason_code if found else None


@pytest.mark.timeout(240)
async def test_a_signed_void_refunds_every_bet_and_a_forged_or_unsigned_one_is_refused(
    system: LocalSystem,
) -> None:
    table = await open_table(system, betting_window_ms=8000)
    first = betting_opened(system, table)[0].coup_id
    stakes = [
        ("p1", "player", 1000),
        ("b1", "banker", 2000),
        ("t1", "tie", 300),
        ("q1", "player_pair", 100),
        ("q2", "banker_pair", 200),
    ]
    bets_1 = [bet(table, first, who, kind, amount) for who, kind, amount in stakes]
    await place_when_known(system, bets_1[0])
    await send_all(system, bets_1[1:])
    await wait(system, lambda: all(answers(system, b.bet_id) for b in bets_1), 60, "answers")
    await system.sender.send_now(CloseBetting(table_id=table, coup_id=first))
    await wait(system, lambda: coup_settled(system, first), 60, "the first coup settled")

    # Refused, nothing changes: no decision, a stranger's key, a known key id with another
    # key, a decision changed after it was signed, a supervisor named who did not sign.
    signer = supervisor(system)
    stranger = SupervisorSigner("mallory-1", "mallory", Ed25519PrivateKey.generate())
    impostor = SupervisorSigner(signer.kid, signer.supervisor_id, Ed25519PrivateKey.generate())
    genuine = signer.void(table, first, "exposed card")
    refusals = {
        "SUPERVISOR_REQUIRED": VoidCoup(table_id=table, coup_id=first, supervisor_id="sup-7"),
        "UNKNOWN_SUPERVISOR_KEY": stranger.void(table, first, "exposed card"),
        "BAD_SIGNATURE": impostor.void(table, first, "exposed card"),
        "AUTHORIZATION_MISMATCH": genuine.model_copy(
            update={"event_id": uuid.uuid4(), "reason": "another reason"}
        ),
    }
    for command in refusals.values():
        await system.sender.send_now(command)
    await wait(
        system,
        lambda: all(refused_with(system, c) for c in refusals.values()),
        30,
        "the forged and unsigned voids to be refused",
    )
    assert {code: refused_with(system, c) for code, c in refusals.items()} == {
        code: code for code in refusals
    }
    assert not system.seen(CoupVoided)
    assert not any(m.coup_id == first for m in system.seen(BetRefunded))

    # The supervisor's signed decision: a settled coup reversed, each bet refunded, winners
    # give back their winnings. Sent twice: the second is a replay, refused, no second effect.
    await system.sender.send_now(genuine)
    await system.sender.send_now(genuine)
    await wait(
        system,
        lambda: (
            any(m.coup_id == first for m in system.seen(CoupRefunded))
            and refused_with(system, genuine)
        ),
        60,
        "the settled coup refunded and the replay refused",
    )
    assert refused_with(system, genuine) == "AUTHORIZATION_REPLAYED"
    [voided] = {m.event_id: m for m in system.seen(CoupVoided) if m.coup_id == first}.values()
    assert (voided.supervisor_id, voided.reason, voided.was_resolved) == (
        LOCAL_SUPERVISOR,
        "exposed card",
        True,
    )
    refunds = {m.bet_id: m for m in system.seen(BetRefunded) if m.coup_id == first}
    assert set(refunds) == {b.bet_id for b in bets_1}

    # A coup still open for bets voided with `punto-banco supervisor void` (it signs, sends
    # and waits for dealing's answer): every stake back, nothing was paid.
    await wait(system, lambda: len(betting_opened(system, table)) >= 2, 60, "the next coup")
    second = betting_opened(system, table)[1].coup_id
    bets_2 = [bet(table, second, who, kind, amount) for who, kind, amount in stakes[:3]]
    await place_when_known(system, bets_2[0])
    await send_all(system, bets_2[1:])
    await wait(system, lambda: all(answers(system, b.bet_id) for b in bets_2), 60, "answers")
    keys = system.settings.data_dir.resolve() / "keys"
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": system.settings.bootstrap,
        "PB_TOPIC_PREFIX": system.settings.topic_prefix,
        "PB_DATA_DIR": str(system.settings.data_dir.resolve()),
        **system.settings.logins.env(SUPERVISOR),  # logged in as the supervisor principal
    }
    key = keys / "supervisors" / f"{LOCAL_SUPERVISOR}.pem"
    args = ["supervisor", "void", "--table", table, "--coup", second, "--reason", "misdeal",
            "--key", str(key), "--timeout", "60"]  # fmt: skip
    result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 0, result.output
    assert '"authorization": "ey' in result.output and f"voided: table {table}" in result.output
    await wait(
        system,
        lambda: any(m.coup_id == second for m in system.seen(CoupRefunded)),
        60,
        "the open coup refunded",
    )
    [voided_open] = [m for m in system.seen(CoupVoided) if m.coup_id == second]
    assert not voided_open.was_resolved and voided_open.supervisor_id == LOCAL_SUPERVISOR
    for refund in (m for m in system.seen(BetRefunded) if m.coup_id == second):
        assert refund.adjustment == refund.stake == refund.refunded
    assert not any(m.coup_id == second for m in system.seen(CoupSettled))

    # The table goes on with a new coup; the first void had no second effect.
    await wait(system, lambda: len(betting_opened(system, table)) >= 3, 60, "a third coup")
    assert len({m.event_id for m in system.seen(CoupVoided) if m.coup_id == first}) == 1
    assert len({m.event_id for m in system.seen(CoupRefunded) if m.coup_id == first}) == 1
    assert_books_clean(system.ledger)  # refunds once each, with the right adjustments


@pytest.mark.timeout(240)
async def test_the_cut_card_ends_the_shoe_after_one_more_coup_and_the_reveal_matches(
    system: LocalSystem,
) -> None:
    table = await open_table(system, decks=1, cut_card_from_end=14, betting_window_ms=50)
    await wait(system, lambda: system.seen(ShoeClosed), 200, "the first shoe to close")
    [shuffled] = [m for m in system.seen(ShoeShuffled) if m.table_id == table][:1]
    shoe = shuffled.shoe_id
    [closed] = {m.event_id: m for m in system.seen(ShoeClosed) if m.shoe_id == shoe}.values()
    [cut] = {m.event_id: m for m in system.seen(CutCardReached) if m.shoe_id == shoe}.values()
    await wait(
        system,
        lambda: any(m.shoe_id != shoe for m in betting_opened(system, table)),
        60,
        "a coup from a new shoe",
    )

    coups = [m for m in betting_opened(system, table) if m.shoe_id == shoe]
    numbers = [m.coup_id for m in coups]
    assert cut.coup_id in numbers
    assert numbers.index(cut.coup_id) == len(numbers) - 2, "exactly one more coup after the cut"
    assert [m.last_of_shoe for m in coups] == [False] * (len(coups) - 1) + [True]
    resolved = {m.coup_id for m in system.seen(CoupResolved)}
    assert set(numbers) <= resolved

    # The reveal: the commitment holds and every card handed out is where the order says.
    order = closed.order
    assert closed.commitment == shuffled.commitment
    assert len(order) == shuffled.card_count == 52
    assert verify_commitment(
        [Card.parse(c) for c in order], bytes.fromhex(closed.salt), shuffled.commitment
    )
    drawn = [m for m in system.seen(CardDrawn) if m.shoe_id == shoe]
    assert drawn
    assert all(order[m.position] == m.card for m in drawn)
    [burn] = {m.event_id: m for m in system.seen(CardsBurned) if m.shoe_id == shoe}.values()
    assert all(order[p.position] == p.card for p in burn.burned)
    assert all(order[m.position] == m.card for m in system.seen(CardDealt) if m.shoe_id == shoe)
    positions = sorted({m.position for m in drawn})
    assert positions == list(range(burn.next_position, burn.next_position + len(positions)))
    assert closed.cards_dealt == positions[-1] + 1
    assert cut.position == shuffled.cut_card_index
    cut_coup_positions = [m.position for m in drawn if m.coup_id == cut.coup_id]
    assert max(cut_coup_positions) >= shuffled.cut_card_index
    earlier = [m.position for m in drawn if m.coup_id in numbers[: numbers.index(cut.coup_id)]]
    assert not earlier or max(earlier) < shuffled.cut_card_index
    assert_books_clean(system.ledger)
