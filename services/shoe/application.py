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

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import EventStore

from contracts import StudioRead
from services.shared.platform.security import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    FieldDecryptionError,
    SecretKeys,
    load_secret_keys,
)
from services.shared.platform.store import (
    Evidence,
    ServiceApplication,
    UnitOfWork,
    raise_incident,
)
from services.shoe.domain import Shoe, ShoeError, shoe_uuid
from services.shoe.studio import (
    Hold,
    Read,
    StudioShoe,
    StudioTable,
    full_shoe,
    studio_table_uuid,
)

log = logging.getLogger(__name__)

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
        card_source: str = "rng",
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
        uow: UnitOfWork | None = None,
    ) -> UUID:
        """Shuffle and burn a new shoe (``card_source="studio"``: open one dealt from the
        table's device); a repeated shoe id changes nothing."""
        with self._unit(uow) as unit:
            existing = unit.get(shoe_uuid(table_id, shoe_id), Aggregate)
            if existing is not None:
                return existing.id
            if card_source == "studio":
                return self._open_studio_shoe(
                    unit, table_id, shoe_id, decks, causation_id, correlation_id
                )
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
            if isinstance(shoe, StudioShoe):
                held = shoe.hold
                fresh = shoe.request(
                    coup_id,
                    request_id,
                    count,
                    causation_id=causation_id,
                    correlation_id=correlation_id,
                )
                if shoe.hold is not held:  # the shoe went out before the coup was dealt
                    self._hold_incident(unit, shoe, shoe.hold, None)
                return fresh
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

    def clear_coup(
        self,
        table_id: str,
        shoe_id: str,
        coup_id: str,
        reason: str,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
        uow: UnitOfWork | None = None,
    ) -> bool:
        """Put a voided coup of a studio shoe aside; False when the shoe is not a studio
        shoe (a software shoe deals a voided coup's cards as drawn: nothing to do)."""
        with self._unit(uow) as unit:
            shoe = self._shoe(unit, table_id, shoe_id)
            if not isinstance(shoe, StudioShoe):
                return False
            shoe.clear(coup_id, reason, causation_id=causation_id, correlation_id=correlation_id)
            return True

    def accept_cards(
        self,
        table_id: str,
        shoe_id: str,
        coup_id: str,
        cards: list[str],
        reason: str,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
        uow: UnitOfWork | None = None,
    ) -> bool:
        """Deal a held studio coup's cards as a supervisor decided them; False when they were
        not taken (an incident says why: the shoe holds on)."""
        with self._unit(uow) as unit:
            shoe = self._shoe(unit, table_id, shoe_id)
            if not isinstance(shoe, StudioShoe):
                return False
            why = shoe.accept(
                coup_id, cards, reason, causation_id=causation_id, correlation_id=correlation_id
            )
            if why is not None:
                raise_incident(
                    unit,
                    self.name,
                    "STUDIO_HOLD",
                    f"CORRECTION_REFUSED: shoe {shoe_id} did not take the cards decided for "
                    f"coup {coup_id}: {why}",
                    table_id=table_id,
                    coup_id=coup_id,
                )
            return why is None

    def take_read(
        self, read: StudioRead, *, uow: UnitOfWork | None = None, evidence: Evidence | None = None
    ) -> None:
        """Take one read of a studio table's device: its current shoe's, or kept for the
        next one (a hold it raises is an incident, with ``evidence``)."""
        with self._unit(uow) as unit:
            table = unit.get(studio_table_uuid(read.table_id), StudioTable)
            if table is None:
                table = StudioTable(read.table_id)
                unit.add(table)
            shoe = None
            if table.shoe_id is not None:
                shoe = unit.get(shoe_uuid(read.table_id, table.shoe_id), StudioShoe)
            taken = Read.of(read)
            if shoe is not None and shoe.taking_reads:
                self._hold_incident(unit, shoe, shoe.take(taken), evidence)
            elif not table.wait(taken, shoe.highest_seq if shoe is not None else None):
                log.warning(
                    "table %s: read %d of device %s not kept for the next shoe (kept already, "
                    "or %d wait)",
                    read.table_id,
                    read.seq,
                    read.device,
                    len(table.waiting),
                )

    def _open_studio_shoe(
        self,
        unit: UnitOfWork,
        table_id: str,
        shoe_id: str,
        decks: int,
        causation_id: UUID | None,
        correlation_id: UUID | None,
    ) -> UUID:
        table = unit.get(studio_table_uuid(table_id), StudioTable)
        if table is None:
            table = StudioTable(table_id)
            unit.add(table)
        previous = None
        if table.shoe_id is not None:
            previous = unit.get(shoe_uuid(table_id, table.shoe_id), StudioShoe)
        shoe = StudioShoe(
            table_id=table_id,
            shoe_id=shoe_id,
            decks=decks,
            card_count=full_shoe(decks),
            after_seq=previous.highest_seq if previous is not None else None,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        unit.add(shoe)
        for read in table.attach(shoe_id):
            self._hold_incident(unit, shoe, shoe.take(read), None)
        return shoe.id

    def _hold_incident(
        self, unit: UnitOfWork, shoe: StudioShoe, hold: Hold | None, evidence: Evidence | None
    ) -> None:
        if hold is None:
            return
        raise_incident(
            unit,
            self.name,
            "STUDIO_HOLD",
            f"{hold.reason}: shoe {shoe.shoe_id} holds (no card leaves it until a "
            f"supervisor's decision): {hold.detail}",
            table_id=shoe.table_id,
            evidence=evidence,
        )

    def get_shoe(self, table_id: str, shoe_id: str) -> Shoe | None:
        """A copy of the shoe as stored (changing it changes nothing), or None."""
        try:
            shoe: object = self.repository.get(shoe_uuid(table_id, shoe_id))
        except AggregateNotFoundError:
            return None
        if not isinstance(shoe, Shoe):
            raise TypeError(f"{shoe_id!r} at table {table_id!r} is not a shoe")
        return shoe

    def get_studio_shoe(self, table_id: str, shoe_id: str) -> StudioShoe | None:
        """A copy of the studio shoe as stored, or None."""
        with self.unit_of_work() as unit:
            return unit.get(shoe_uuid(table_id, shoe_id), StudioShoe)

    @staticmethod
    def _shoe(unit: UnitOfWork, table_id: str, shoe_id: str) -> Shoe | StudioShoe:
        shoe = unit.get(shoe_uuid(table_id, shoe_id), Aggregate)
        if not isinstance(shoe, Shoe | StudioShoe):
            raise UnknownShoe(f"no shoe {shoe_id!r} at table {table_id!r}")
        return shoe
