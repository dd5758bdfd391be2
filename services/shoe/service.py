"""The shoe service process: consumes shoe commands, publishes shoe events.

``punto-banco serve shoe`` runs ``build_service(settings)`` with the platform
runner: the relay publishes the store's events on ``punto-banco.shoe-events``
and the consumer applies each fetched batch of commands in one transaction
with its tracking record (see ``services.shared.platform``).
"""

from __future__ import annotations

from contracts import SHOE_COMMANDS
from services.shared.platform.application import UnitOfWork
from services.shared.platform.consumer import Delivery, Subscription, with_unit_of_work
from services.shared.platform.runner import ServiceDefinition, serve
from services.shared.platform.settings import Settings
from services.shoe.application import ShoeApplication
from services.shoe.messages import apply_command, to_messages

NAME = "shoe"


def _subscriptions(app: ShoeApplication) -> list[Subscription]:
    def handle(uow: UnitOfWork, delivery: Delivery) -> None:
        apply_command(app, uow, delivery.message)

    return [Subscription(SHOE_COMMANDS, with_unit_of_work(app, handle))]


def build_service(settings: Settings) -> ServiceDefinition[ShoeApplication]:
    """The shoe service, as the platform runs it."""
    return ServiceDefinition(
        name=NAME,
        application=lambda env: ShoeApplication(env=env),
        to_messages=to_messages,
        subscriptions=_subscriptions,
    )


def main() -> int:
    settings = Settings.from_env(NAME)
    return serve(build_service(settings), settings)


if __name__ == "__main__":
    raise SystemExit(main())
