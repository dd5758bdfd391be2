"""The shoe service's Application: shuffle, draw and close shoes, exactly once each.

Every command works inside a platform ``UnitOfWork`` so the service runtime can
record a whole batch of commands together with its Kafka tracking position; a
caller without one (tests, tools) gets a unit committed at once.

Secrets at rest: each shoe's order and salt are stored encrypted (the ``Shuffled`` fact
declares them ``ENCRYPTED``; ``platform.security.field_encryption``) with the keys its
environment names (``PB_SHOE_SECRET_KEY_FILE`` or ``PB_SHOE_SECRET_KEY``,
``security/keys.py``). Without usable keys the Application does not start; at start it also
decrypts the newest encrypted shoe of its store, so a wrong key is refused before any card
is dealt (and a shoe that does not decrypt later fails the command that needs it: never a
card from garbage). It keeps no snapshots: a snapshot would hold an order in plain text.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import EventStore

from services.shared.platform.security import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    FieldDecryptionError,
    SecretKeys,
    load_secret_keys,
)
from services.shared.platform.store import ServiceApplication, UnitOfWork
from services.shoe.domain import Shoe, ShoeError, shoe_uuid

SHUFFLED_TOPIC = Shoe.Shuffled.TOPIC


class UnknownShoe(ShoeError):
    pass


class ShoeKeyError(ShoeError):
    """The shoe's secret keys do not open the shoes in its store."""


class ShoeApplication(ServiceApplication):
    name = "shoe"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__(env)
        self.check_secret_keys()

    def construct_secret_keys(self) -> SecretKeys:
        """From the environment (SecretKeyError says what to run when they are missing)."""
        return load_secret_keys(self.env.get(KEY_VARIABLE), self.env.get(KEY_FILE_VARIABLE))

    def construct_snapshot_store(self) -> EventStore[UUID]:
        raise ShoeError(
            "the shoe keeps no snapshots: a snapshot would hold a shoe's order and salt in "
            "plain text (unset IS_SNAPSHOTTING_ENABLED)"
        )

    def check_secret_keys(self, window: int = 10_000, reach: int = 200_000) -> UUID | None:
        """Decrypt the newest shoe of the store (looking back at most ``reach`` events): its
        id, or None when there is none. ShoeKeyError when the keys do not open it."""
        stop = self.recorder.max_notification_id() or 0
        top = stop
        while stop > 0 and top - stop < reach:
            start = max(1, stop - window + 1)
            found = self.process_recorder.select_notifications(
                start, window, stop=stop, topics=[SHUFFLED_TOPIC]
            )
            if found:
                try:
                    self.mapper.to_domain_event(found[-1])
                except FieldDecryptionError as error:
                    raise ShoeKeyError(
                        f"the shoe's secret keys do not open the newest shoe in its store, so "
                        f"it would not deal from it: {error}"
                    ) from None
                return UUID(str(found[-1].originator_id))
            stop = start - 1
        return None

    @contextmanager
    def _unit(self, uow: UnitOfWork | None) -> Iterator[UnitOfWork]:
        if uow is not None:
            yield uow
        else:
            with self.unit_of_work() as own:
                yield own

    def shuffle_shoe(
        self,
        table_id: str,
        shoe_id: str,
        decks: int,
        cut_card_from_end: int,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
        uow: UnitOfWork | None = None,
    ) -> UUID:
        """Shuffle and burn a new shoe; a repeated shoe id changes nothing."""
        with self._unit(uow) as unit:
            existing = unit.get(shoe_uuid(table_id, shoe_id), Shoe)
            if existing is not None:
                return existing.id
            shoe = Shoe.shuffle(
                table_id,
                shoe_id,
                decks,
                cut_card_from_end,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
            shoe.burn(causation_id=causation_id, correlation_id=correlation_id)
            unit.add(shoe)
            return shoe.id

    def draw_cards(
        self,
        table_id: str,
        shoe_id: str,
        coup_id: str,
        request_id: str,
        count: int,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
        uow: UnitOfWork | None = None,
    ) -> bool:
        """Draw ``count`` cards for a coup; False when the request id was seen before."""
        with self._unit(uow) as unit:
            shoe = self._shoe(unit, table_id, shoe_id)
            return shoe.draw(
                coup_id,
                request_id,
                count,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )

    def close_shoe(
        self,
        table_id: str,
        shoe_id: str,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
        uow: UnitOfWork | None = None,
    ) -> bool:
        """Close the shoe and reveal it; False when it was closed already."""
        with self._unit(uow) as unit:
            shoe = self._shoe(unit, table_id, shoe_id)
            return shoe.close(causation_id=causation_id, correlation_id=correlation_id)

    def get_shoe(self, table_id: str, shoe_id: str) -> Shoe | None:
        """A copy of the shoe as stored (changing it changes nothing), or None."""
        try:
            shoe: object = self.repository.get(shoe_uuid(table_id, shoe_id))
        except AggregateNotFoundError:
            return None
        if not isinstance(shoe, Shoe):
            raise TypeError(f"{shoe_id!r} at table {table_id!r} is not a shoe")
        return shoe

    @staticmethod
    def _shoe(unit: UnitOfWork, table_id: str, shoe_id: str) -> Shoe:
        shoe = unit.get(shoe_uuid(table_id, shoe_id), Shoe)
        if shoe is None:
            raise UnknownShoe(f"no shoe {shoe_id!r} at table {table_id!r}")
        return shoe
