"""The shoe service as a FastStream application: shoe commands in, shoe events out.

``punto-banco serve shoe`` runs :func:`build_service` (``services.shared.platform``): its one
batch subscriber reads dealing's commands (ShuffleShoe, DrawCards...) on
``punto-banco.shoe-commands``, a second the device bridge's reads of studio tables on
``punto-banco.studio-reads``; each applies each fetched batch of a partition in one
transaction with its tracking record; the outbox relay publishes the store's events on
``punto-banco.shoe-events``.
"""

from __future__ import annotations

from contracts import SHOE_COMMANDS, SHOE_EVENTS, STUDIO_READS, ShoeCommand, StudioRead
from services.shared.platform.consumer import Delivery, Subscription, with_unit_of_work
from services.shared.platform.host import KafkaService, ServiceDefinition, serve
from services.shared.platform.settings import Settings
from services.shared.platform.store import UnitOfWork
from services.shoe.application import ShoeApplication
from services.shoe.messages import apply_command, apply_read, to_messages

NAME = "shoe"


def _subscriptions(app: ShoeApplication) -> list[Subscription]:
    def handle(uow: UnitOfWork, delivery: Delivery) -> None:
        apply_command(app, uow, delivery.message)

    def take(uow: UnitOfWork, delivery: Delivery) -> None:
        apply_read(app, uow, delivery)

    return [
        Subscription(SHOE_COMMANDS, with_unit_of_work(app, handle)),
        Subscription(STUDIO_READS, with_unit_of_work(app, take)),
    ]


def build_service(settings: Settings) -> KafkaService[ShoeApplication]:
    """The shoe service: its broker's subscriber and publishers, and what it runs."""
    service = KafkaService(
        ServiceDefinition(
            name=NAME,
            application=lambda env: ShoeApplication(env=env),
            to_messages=to_messages,
            subscriptions=_subscriptions,
        ),
        settings,
        description="The shoe: shuffles, burns and draws cards for dealing.",
    )

    @service.subscriber(
        SHOE_COMMANDS,
        STUDIO_READS,
        description="Dealing's requests (signed by dealing) and the reads of studio tables' "
        "devices (signed by the device bridge, docs/studio.md): a fetched batch of a "
        "partition is applied in one transaction.",
    )
    async def shoe_inputs(batch: list[ShoeCommand | StudioRead]) -> None:
        # The raw records of one fetch (the type says what they carry): see consumer.py.
        await service.consume(batch)

    service.publisher(
        SHOE_EVENTS,
        description="Each shoe's shuffle, burns, cards and cut card, in the order dealt.",
    )
    return service


def main() -> int:
    settings = Settings.from_env(NAME)
    return serve(build_service(settings), settings)


if __name__ == "__main__":
    raise SystemExit(main())
