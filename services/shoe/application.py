"""The shoe service's Application: shuffle, draw and close shoes, exactly once each.

Every command works inside a platform ``UnitOfWork`` so the service runtime can
record a whole batch of commands together with its Kafka tracking position; a
caller without one (tests, tools) gets a unit committed at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from services.shared.platform.application import ServiceApplication, UnitOfWork
from services.shoe.domain import Shoe, ShoeError, shoe_uuid


class UnknownShoe(ShoeError):
    pass


class ShoeApplication(ServiceApplication):
    name = "shoe"

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
