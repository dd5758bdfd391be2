"""Place a few bets on the open coup of a table and print the answers and the settlements.

A minimal integrator's client: plain aiokafka and the ``contracts`` package, nothing else of
the project. It logs in as the ``gateway`` principal, which may send bets and read their
answers and the table's events, nothing else: the same variables as the services
(``KAFKA_BOOTSTRAP_SERVERS``, ``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_MECHANISM``,
``KAFKA_SASL_USERNAME``, ``KAFKA_SASL_PASSWORD``, ``KAFKA_SSL_CAFILE``). Run the system first
(``punto-banco up`` in another terminal), then::

    eval "$(.venv/bin/punto-banco infra status)"            # the broker and its protocol
    eval "$(.venv/bin/punto-banco infra credentials gateway)"  # the gateway's login
    .venv/bin/python examples/place_bets.py                 # the table of the latest coup
    .venv/bin/python examples/place_bets.py --table demo-20261130093000-1 --bootstrap 127.0.0.1:9092
    .venv/bin/python examples/place_bets.py --operator acme   # as gateway-acme (its credentials)

What it does, step by step:

1. reads ``table-events`` from the beginning to learn the table's settings (TableOpened: limits,
   currency) and which coup is open for bets (the latest BettingOpened without BettingClosed),
   waiting for the next BettingOpened if betting is closed right now or closes too soon for
   the bets to reach the broker in time (``time_to_bet``);
2. sends PlaceBet commands to its operator's ``bet-commands`` topic with the table id as the
   Kafka key (so they are ordered with everything else of the table), one of them deliberately
   below the minimum;
3. prints each answer from its operator's ``bet-events`` topic (BetAccepted / BetRejected with
   its reason code), then each BetSettled and the coup's CoupSettled, and exits once every
   accepted bet is settled. If every bet came too late (``BETTING_CLOSED``), it bets again, with
   new bet ids, on the next coup.

``--operator``: whose gateway this is (default ``house``: ``punto-banco.bet-commands`` and
``punto-banco.bet-events``; ``acme``: ``punto-banco.bet-commands.acme`` and
``punto-banco.bet-events.acme``). The operator is the topic: a bet never names it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.helpers import create_ssl_context

from contracts import (
    HOUSE,
    TABLE_EVENTS,
    BetAccepted,
    BetRefunded,
    BetRejected,
    BetSettled,
    BettingClosed,
    BettingOpened,
    ContractError,
    CoupSettled,
    Message,
    PlaceBet,
    TableOpened,
    bet_commands_topic,
    bet_events_topic,
    decode,
    encode,
    partition_key,
)

MARGIN = timedelta(seconds=1)  # how long a coup must stay open for us to bet on it (at most)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or "127.0.0.1:9092",
        help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument("--topic-prefix", default="", help="PB_TOPIC_PREFIX of the system")
    parser.add_argument("--table", default=None, help="table id (default: the latest coup's)")
    parser.add_argument("--bettor", default=f"example-{uuid.uuid4().hex[:6]}", help="bettor id")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after seconds")
    parser.add_argument("--operator", default=HOUSE, help="the operator whose gateway this is")
    return parser.parse_args()


def login() -> dict[str, Any]:
    """How to log in, from the environment: SASL/SCRAM as the gateway (``KAFKA_SASL_*``), over
    TLS checked against ``KAFKA_SSL_CAFILE`` with ``SASL_SSL``; nothing for PLAINTEXT."""
    protocol = (os.environ.get("KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT").upper()
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        options["sasl_mechanism"] = os.environ.get("KAFKA_SASL_MECHANISM") or "SCRAM-SHA-512"
        options["sasl_plain_username"] = os.environ.get("KAFKA_SASL_USERNAME", "")
        options["sasl_plain_password"] = os.environ.get("KAFKA_SASL_PASSWORD", "")
    if protocol.endswith("SSL"):
        options["ssl_context"] = create_ssl_context(cafile=os.environ.get("KAFKA_SSL_CAFILE"))
    return options


class Follower:
    """Reads table-events and bet-events: first what is already there, then what comes.

    Without a consumer group every partition is read, from the earliest offset.
    """

    def __init__(self, bootstrap: str, prefix: str, operator: str = HOUSE) -> None:
        self.prefix = prefix
        self.consumer = AIOKafkaConsumer(
            prefix + TABLE_EVENTS,
            prefix + bet_events_topic(operator),
            bootstrap_servers=bootstrap,
            **login(),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )

    async def start(self) -> None:
        await self.consumer.start()

    async def messages(self) -> list[Message]:
        batches = await self.consumer.getmany(timeout_ms=200)
        found: list[Message] = []
        for partition, records in batches.items():
            topic = partition.topic[len(self.prefix) :]
            for record in records:
                try:
                    found.append(decode(topic, record.value))
                except ContractError as error:  # not ours to fix: report and go on
                    print(f"  (skipping an undecodable record: {error})", file=sys.stderr)
        return found


async def main(args: argparse.Namespace) -> int:
    follower = Follower(args.bootstrap, args.topic_prefix, args.operator)
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap, **login(), enable_idempotence=True
    )
    try:
        await follower.start()
        await producer.start()
    except KafkaConnectionError:
        await follower.consumer.stop()
        await producer.stop()
        print(f"no Kafka at {args.bootstrap}: is `punto-banco up` running?", file=sys.stderr)
        return 2
    except KafkaError as error:  # refused credentials, or none given to a broker that wants them
        await follower.consumer.stop()
        await producer.stop()
        print(
            f"Kafka at {args.bootstrap} refused us ({error}): log in as the gateway, "
            '`eval "$(punto-banco infra credentials gateway)"` for the local broker',
            file=sys.stderr,
        )
        return 2
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.timeout
    tables: dict[str, TableOpened] = {}
    open_coups: dict[str, BettingOpened] = {}  # table -> its coup open for bets
    table_id: str | None = args.table
    sent: dict[str, PlaceBet] = {}
    resends: dict[str, int] = {}
    accepted: set[str] = set()
    late: set[str] = set()  # refused BETTING_CLOSED
    settled: set[str] = set()
    try:
        while loop.time() < deadline:
            for message in await follower.messages():
                if isinstance(message, TableOpened):
                    tables[message.table_id] = message
                elif isinstance(message, BettingOpened):
                    open_coups[message.table_id] = message
                    if args.table is None and not sent:
                        table_id = message.table_id  # follow the latest coup's table
                elif isinstance(message, BettingClosed):
                    if open_coups.get(message.table_id, message).coup_id == message.coup_id:
                        open_coups.pop(message.table_id, None)
                elif (
                    isinstance(message, BetRejected)
                    and message.bet_id in sent
                    and message.reason_code == "NO_SUCH_COUP"
                    and resends.get(message.bet_id, 0) < 5
                ):
                    # The bet overtook BettingOpened on its way to settlement: this refusal does
                    # not use up the bet id, so the very same bet may simply be sent again.
                    resends[message.bet_id] = resends.get(message.bet_id, 0) + 1
                    print(f"resend   {message.bet_id} (settlement did not know the coup yet)")
                    await asyncio.sleep(0.2)
                    await send(producer, args.topic_prefix, sent[message.bet_id], args.operator)
                elif isinstance(message, BetAccepted | BetRejected) and message.bet_id in sent:
                    report_answer(message)
                    if isinstance(message, BetAccepted):
                        accepted.add(message.bet_id)
                    elif message.reason_code == "BETTING_CLOSED":
                        late.add(message.bet_id)
                elif isinstance(message, BetSettled) and message.bet_id in sent:
                    settled.add(message.bet_id)
                    print(
                        f"settled  {message.bet_id}: {message.bet_type} {message.result}, "
                        f"stake {message.stake}, payout {message.payout}, "
                        f"returned {message.returned} {message.currency}"
                    )
                elif isinstance(message, BetRefunded) and message.bet_id in sent:
                    settled.add(message.bet_id)
                    print(f"refunded {message.bet_id}: {message.refunded} {message.currency}")
                elif isinstance(message, CoupSettled) and any(
                    b.coup_id == message.coup_id for b in sent.values()
                ):
                    print(
                        f"coup {message.coup_id} settled: {message.bets} bets, staked "
                        f"{message.staked}, paid {message.paid}, house {message.house_result}"
                    )
            if sent and late == set(sent):
                print("too late: betting again (new bet ids) on the next coup")
                sent, late = {}, set()
            if not sent and table_id is not None:
                coup = open_coups.get(table_id)
                table = tables.get(table_id)
                if coup is not None and table is not None and time_to_bet(table, coup):
                    sent = await place_bets(producer, args, table, coup)
            if sent and accepted and accepted <= settled:
                return 0
    finally:
        await producer.stop()
        await follower.consumer.stop()
    print(f"gave up after {args.timeout:.0f} s", file=sys.stderr)
    return 1


def now() -> datetime:
    return datetime.now(UTC)


def time_to_bet(table: TableOpened, coup: BettingOpened) -> bool:
    """Whether the coup stays open long enough for bets sent now to reach the broker in time:
    ``MARGIN``, or half the window at a table whose betting window is shorter than that."""
    margin = min(MARGIN, timedelta(milliseconds=table.betting_window_ms) / 2)
    return coup.closes_at - now() > margin


async def place_bets(
    producer: AIOKafkaProducer, args: argparse.Namespace, table: TableOpened, coup: BettingOpened
) -> dict[str, PlaceBet]:
    """A Banker bet, a Tie bet and a Player Pair at the minimum, and one bet below it."""
    minimum = {name: limit.minimum for name, limit in table.limits.items()}
    wanted = [
        ("banker", minimum["banker"] * 10),
        ("tie", minimum["tie"]),
        ("player_pair", minimum["player_pair"]),
        ("player", minimum["player"] - 1),  # refused: BELOW_MINIMUM (or INVALID_AMOUNT at 0)
    ]
    bets: dict[str, PlaceBet] = {}
    print(f"table {table.table_id}, coup {coup.coup_id} (betting closes {coup.closes_at:%X})")
    for bet_type, amount in wanted:
        bet = PlaceBet(
            table_id=table.table_id,
            bet_id=f"{args.bettor}-{uuid.uuid4().hex[:12]}",  # your idempotency key: keep it
            coup_id=coup.coup_id,
            bettor_id=args.bettor,
            bet_type=bet_type,
            amount=amount,
            currency=table.currency,
        )
        await send(producer, args.topic_prefix, bet, args.operator)
        bets[bet.bet_id] = bet
        print(f"sent     {bet.bet_id}: {bet_type} {amount} {table.currency}")
    return bets


async def send(
    producer: AIOKafkaProducer, prefix: str, bet: PlaceBet, operator: str = HOUSE
) -> None:
    """PlaceBet on the operator's bet-commands topic, keyed by the table id (ordered with the
    table's messages). The topic is the operator: the bet itself never names one."""
    topic = prefix + bet_commands_topic(operator)
    await producer.send_and_wait(topic, encode(bet), key=partition_key(bet))


def report_answer(message: BetAccepted | BetRejected) -> None:
    if isinstance(message, BetAccepted):
        print(f"accepted {message.bet_id}: {message.bet_type} {message.amount}")
    else:
        print(f"rejected {message.bet_id}: {message.reason_code} - {message.message}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
