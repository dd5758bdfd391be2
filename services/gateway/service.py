"""One operator's gateway as a service on the platform: bets out, answers and tables in.

``gateway_service(settings, keys, config)`` is a :class:`~services.shared.platform.KafkaService`
named ``gateway-<operator>`` (the house's ``gateway``): that is its Kafka principal, consumer
group, store (SQLite ``gateway-<operator>.sqlite``, PostgreSQL schema
``gateway_<operator>_<digest>``: ``settings.schema_name``),
signing key (its seal anchors) and incidents' service. Its one batch subscriber reads the
operator's bet-events topic (answers, settlements, refunds) and table-events (the tables'
public facts), each partition's batch applied in one transaction with its tracking record; its
outbox relay publishes each bet that goes on as a PlaceBet to the operator's bet-commands topic,
keyed by table id with the producer's murmur2 partitioner (``contracts.topics_for``); its task
is the wallet outbox (``outbox.py``). The HTTP API (``api.py``) calls it through its worker
thread; ``host.py`` runs one per operator in one process.
"""

from __future__ import annotations

import dataclasses

from contracts import (
    SEALS,
    TABLE_EVENTS,
    BetEvent,
    PlaceBet,
    TableEvent,
    bet_commands_topic,
    bet_events_topic,
)
from services.gateway.application import GatewayApplication
from services.gateway.config import GatewayConfig
from services.gateway.messages import to_messages
from services.gateway.operators import OperatorKeys, service_name
from services.gateway.outbox import WalletOutbox
from services.gateway.wallet import WalletClient
from services.shared.platform.consumer import Subscription, with_unit_of_work
from services.shared.platform.host import KafkaService, ServiceDefinition
from services.shared.platform.settings import Settings, replace


def gateway_settings(base: Settings, keys: OperatorKeys) -> Settings:
    """The settings of ``keys.operator``'s gateway service: its name, its one operator, its
    Kafka login (the operator file's password for its principal, else the process's), no
    operations port of its own (the gateway's HTTP app serves them for every operator)."""
    name = service_name(keys.operator)
    auth = base.kafka_auth
    if keys.kafka_password:
        auth = dataclasses.replace(auth, username=name, password=keys.kafka_password)
    return replace(
        base,
        service=name,
        operators=(keys.operator,),
        http_port=None,
        kafka_auth=auth,
        partitioned=False,  # one service per operator (docs/scaling.md)
        partition=None,
    )


class GatewayService(KafkaService[GatewayApplication]):
    """One operator's gateway service, with its wallet outbox."""

    keys: OperatorKeys
    outbox: WalletOutbox


def gateway_service(
    settings: Settings, keys: OperatorKeys, config: GatewayConfig
) -> GatewayService:
    """The gateway service of one operator (``settings``: :func:`gateway_settings`)."""
    client = (
        WalletClient(keys.wallet_url, keys.wallet_secret, config.wallet_timeout)
        if keys.wallet_url
        else None
    )
    outbox = WalletOutbox(config, client, keys.operator)
    events = bet_events_topic(keys.operator)

    def application(env: dict[str, str]) -> GatewayApplication:
        return GatewayApplication(
            env=env,
            operator=keys.operator,
            service=settings.service,
            wallet=client is not None,
            zero_credits=config.wallet_zero_credits,
        )

    def subscriptions(app: GatewayApplication) -> list[Subscription]:
        handler = with_unit_of_work(app, app.handle)
        return [Subscription(TABLE_EVENTS, handler), Subscription(events, handler)]

    service = GatewayService(
        ServiceDefinition(
            name=settings.service,
            application=application,
            to_messages=to_messages,
            subscriptions=subscriptions,
            tasks=[outbox.run],
        ),
        settings,
        description=f"The gateway of operator {keys.operator}: its platform's bets, and its "
        "players' money through its seamless wallet.",
    )
    service.keys = keys
    service.outbox = outbox
    # PlaceBet needs no signature (settlement takes a bet's operator from its topic).
    service.relay_options["signed_topics"] = frozenset({SEALS})

    @service.subscriber(
        TABLE_EVENTS,
        events,
        description="Dealing's table events (the tables' public facts, signed) and settlement's "
        f"answers, settlements and refunds of operator {keys.operator}'s bets.",
    )
    async def gateway_inputs(batch: list[TableEvent | BetEvent]) -> None:
        await service.consume(batch)

    # PlaceBet comes from outside the three services (contracts.EXTERNAL): documented here.
    commands = bet_commands_topic(keys.operator)
    service.outputs[commands] = PlaceBet
    service.broker.publisher(
        settings.topic(commands),
        title=f"{settings.service} publishes {commands}",
        description=f"Operator {keys.operator}'s bets (PlaceBet), keyed by table id.",
        schema=PlaceBet,
    )
    return service
