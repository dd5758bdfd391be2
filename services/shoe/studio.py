"""A studio table's shoe: its cards are what the table's card-reading shoe reads.

The device bridge publishes each read of the device once (``StudioRead``, docs/studio.md). A
:class:`StudioShoe` takes them in the device's order (its ``seq``) and plays the part the
software :class:`~services.shoe.domain.Shoe` plays for dealing: the burn (``SHOE-IN``,
``BURN-START``, the shown card and as many burned as its value, ``BURN-END``) becomes
``CardsBurned``; then each card read is the next card at the next position, handed to
dealing's oldest ``DrawCards`` that still wants one (a card read before its request waits
for it); the ``CUT-CARD`` read places the cut card before the next card.

Each coup is its cards then the dealer's ``BUTTON CONFIRM``. The shoe checks the cards of
the coup being dealt with the tableau, so it knows when the coup is complete; the coup's last
card is handed out only on the dealer's CONFIRM, so dealing resolves (and settlement settles)
only a result the dealer confirmed: unconfirmed, the coup waits. It holds
(:class:`HoldReason`) on what it cannot deal on: sequence numbers never received, a card the
decks cannot hold, a card after the coup was complete (the tableau did not ask for it), a
CONFIRM before the coup was complete, a burn that is not the shown card's, a read out of turn,
the shoe taken out mid-coup, the dealer's supervisor button, a reader that reads nothing
(more than :data:`MAX_UNREADABLE` ``UNREADABLE`` in a row). A held shoe hands out no card
(so nothing settles) until a supervisor's signed decision, which dealing verifies: void the
coup (``ClearCoup``: its cards put aside) or correct it (``AcceptCards``: the coup's cards as
decided, the ones not read taken as the next positions); the reads it gets meanwhile are kept
(``held``) for that decision. After an ``UNREADABLE`` read the coup waits for the card
re-scanned; its wait is measured (``waited_ms``, from the first ``UNREADABLE``).

:class:`StudioTable` routes a table's reads to its current studio shoe; a read with no shoe to
take it (before the first opens, after one went out) waits there for the next.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple
from uuid import UUID, uuid5

from eventsourcing.domain import Aggregate, event

from services.shared.facts.shoe import (
    CardsAcceptedFact,
    CardsBurnedFact,
    CardsDrawnFact,
    CorrectionWaitingFact,
    CoupClearedFact,
    DrawRequestedFact,
    ReadTakenFact,
    ReadWaitingFact,
    ShoeAttachedFact,
    ShoeHeldFact,
    StudioShoeClosedFact,
    StudioShoeOpenedFact,
    StudioTableStartedFact,
)
from services.shared.facts.topics import record, register_stored_topics
from services.shared.rules.cards import Card
from services.shared.rules.shoe import CARDS_PER_DECK, burn_count
from services.shared.rules.tableau import NotEnoughCards, resolve_coup
from services.shoe.domain import ShoeError, ShoeIsClosed, shoe_uuid

STUDIO_TABLE_NAMESPACE = UUID("9d1e7c52-3f0a-4b6e-8a27-5c4d1f9e0b36")
MAX_HELD_READS = 64
"""Reads kept while a shoe is held; later ones are not taken (the bridge's store has them)."""
MAX_WAITING_READS = 64
"""Reads kept for a table's next shoe; later ones are not taken."""
MAX_UNREADABLE = 10
"""``UNREADABLE`` reads in a row (no card read between them) a shoe takes; one more holds it."""


class HoldReason(StrEnum):
    """Why a studio shoe stopped dealing (the incident's message starts with it)."""

    GAP = "GAP"  # device sequence numbers never received
    IMPOSSIBLE_CARD = "IMPOSSIBLE_CARD"  # one copy more of a card than the decks hold
    UNASKED_CARD = "UNASKED_CARD"  # a card after the coup was complete, before CONFIRM
    INCOMPLETE_COUP = "INCOMPLETE_COUP"  # CONFIRM before the coup's cards were all read
    BAD_BURN = "BAD_BURN"  # BURN-END after other than the shown card's burn
    OUT_OF_TURN = "OUT_OF_TURN"  # a read the shoe's phase does not admit
    SHOE_OUT_MID_COUP = "SHOE_OUT_MID_COUP"  # SHOE-OUT with a coup begun or asked for
    SUPERVISOR_CALLED = "SUPERVISOR_CALLED"  # the dealer's supervisor button
    UNREADABLE_STREAK = "UNREADABLE_STREAK"  # more than MAX_UNREADABLE unreadable in a row
    MALFORMED_READ = "MALFORMED_READ"  # a read without its kind's field, or with another's


class Phase(StrEnum):
    WAITING = "WAITING"  # for SHOE-IN
    LOADED = "LOADED"  # for BURN-START
    BURNING = "BURNING"  # the shown card and the burn, until BURN-END
    DEALING = "DEALING"
    OUT = "OUT"  # SHOE-OUT: the shoe takes no more reads


class Read(NamedTuple):
    """A ``StudioRead``'s fields, as the shoe takes them."""

    device: str
    seq: int
    what: str
    card: str | None
    button: str | None
    last_seq: int | None
    read_at: datetime

    @classmethod
    def of(cls, source: object) -> Read:
        """The read of anything with its fields (a ``StudioRead``, a stored fact)."""
        return cls(*(getattr(source, name) for name in cls._fields))


class Hold(NamedTuple):
    reason: HoldReason
    detail: str


class Request(NamedTuple):
    coup_id: str
    request_id: str
    wanted: int
    causation_id: UUID | None
    correlation_id: UUID | None


def studio_table_uuid(table_id: str) -> UUID:
    return uuid5(STUDIO_TABLE_NAMESPACE, table_id)


def coup_complete(cards: list[str]) -> bool:
    """Whether ``cards`` (in the order read) are a whole coup: the tableau wants no more."""
    if len(cards) < 4:
        return False
    try:
        return resolve_coup([Card.parse(code) for code in cards]).cards_used == len(cards)
    except NotEnoughCards:
        return False


class StudioShoe(Aggregate):
    """The shoe of a studio table: cards by position, as its device read them."""

    class Opened(StudioShoeOpenedFact, Aggregate.Created):
        TOPIC = StudioShoeOpenedFact.STORED_TOPIC

    class ReadTaken(ReadTakenFact, Aggregate.Event):
        TOPIC = ReadTakenFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            last = self.last_seq if self.what == "gap" and self.last_seq is not None else self.seq
            shoe.highest_seq = max(last, self.seq, shoe.highest_seq or -1)
            if self.held:
                shoe.held_seqs.add(self.seq)
                if shoe.void_waiting is not None and self.button == "CONFIRM":
                    shoe.lift_hold(cut_at=len(shoe.cards))  # the voided coup's end: deal on
                    return
                shoe.held_confirm = shoe.held_confirm or self.button == "CONFIRM"
                shoe.held_cut = shoe.held_cut or self.what == "cut-card"
                shoe.held_out = shoe.held_out or self.what == "shoe-out"
                if self.card is not None:
                    shoe.held_cards.append(self.card)
                return
            shoe.taken_seq = shoe.highest_seq
            shoe.device = shoe.device or self.device
            if self.what == "unreadable":
                shoe.unreadable_since = shoe.unreadable_since or self.read_at
                shoe.unreadable += 1
            elif self.what == "card":
                shoe.unreadable_since = None
                shoe.unreadable = 0
            if self.position is not None and self.card is not None:
                shoe.cards.append(self.card)
                if shoe.phase is Phase.DEALING:
                    shoe.coup_cards.append(self.card)
                    if coup_complete(shoe.coup_cards):
                        shoe.unconfirmed = self.position
            read_in, after = _PHASES.get(self.what, (None, None))
            if after is not None and shoe.phase is read_in:
                shoe.phase = after
            if self.what == "cut-card":
                shoe.cut_position = len(shoe.cards)
            elif self.button == "CONFIRM":
                shoe.coup_cards = []
                shoe.unconfirmed = None

    class CardsBurned(CardsBurnedFact, Aggregate.Event):
        TOPIC = "services.shoe.studio:StudioShoe.CardsBurned"

        def apply(self, shoe: StudioShoe) -> None:
            shoe.phase = Phase.DEALING
            shoe.served = self.next_position

    class DrawRequested(DrawRequestedFact, Aggregate.Event):
        TOPIC = DrawRequestedFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            shoe.request_ids.add(self.request_id)
            shoe.requests.append(
                Request(
                    self.coup_id,
                    self.request_id,
                    self.count,
                    self.causation_id,
                    self.correlation_id,
                )
            )

    class CardsDrawn(CardsDrawnFact, Aggregate.Event):
        TOPIC = "services.shoe.studio:StudioShoe.CardsDrawn"

        def apply(self, shoe: StudioShoe) -> None:
            shoe.served = self.first_position + len(self.cards)
            first, rest = shoe.requests[0], shoe.requests[1:]
            left = first.wanted - len(self.cards)
            shoe.requests = [first._replace(wanted=left), *rest] if left > 0 else rest
            if self.cut_card_position is not None:
                shoe.cut_announced = True

    class Held(ShoeHeldFact, Aggregate.Event):
        TOPIC = ShoeHeldFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            shoe.hold = Hold(HoldReason(self.reason), self.detail)

    class CoupCleared(CoupClearedFact, Aggregate.Event):
        TOPIC = CoupClearedFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            shoe.requests = [r for r in shoe.requests if r.coup_id != self.coup_id]
            shoe.served = self.next_position
            shoe.coup_cards = []
            shoe.unconfirmed = None
            if self.until_confirm:
                shoe.void_waiting = self.coup_id
            else:
                shoe.lift_hold(cut_at=self.next_position)

    class CardsAccepted(CardsAcceptedFact, Aggregate.Event):
        TOPIC = CardsAcceptedFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            shoe.lift_hold(cut_at=shoe.served)
            shoe.cards.extend(self.cards)
            shoe.coup_cards = []
            shoe.unconfirmed = None
            shoe.corrected.add(self.coup_id)

    class CorrectionWaiting(CorrectionWaitingFact, Aggregate.Event):
        TOPIC = CorrectionWaitingFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            shoe.waiting_correction = CorrectionWaitingFact(
                self.table_id,
                self.shoe_id,
                self.coup_id,
                self.cards,
                self.reason,
                self.causation_id,
                self.correlation_id,
            )

    class Closed(StudioShoeClosedFact, Aggregate.Event):
        TOPIC = StudioShoeClosedFact.STORED_TOPIC

        def apply(self, shoe: StudioShoe) -> None:
            shoe.closed = True

    @staticmethod
    def create_id(table_id: str, shoe_id: str) -> UUID:
        return shoe_uuid(table_id, shoe_id)

    @event(Opened)
    def __init__(
        self,
        table_id: str,
        shoe_id: str,
        decks: int,
        card_count: int,
        after_seq: int | None,
        causation_id: UUID | None,
        correlation_id: UUID | None,
    ) -> None:
        self.table_id = table_id
        self.shoe_id = shoe_id
        self.decks = decks
        self.card_count = card_count
        self.highest_seq: int | None = after_seq
        self.taken_seq: int | None = after_seq  # the highest taken unheld, or decided on
        self.device: str | None = None
        self.phase = Phase.WAITING
        self.cards: list[str] = []  # by position: the shown card, the burn, then dealt
        self.coup_cards: list[str] = []  # the cards read since the last CONFIRM
        self.unconfirmed: int | None = None  # the last card of a coup awaiting its CONFIRM
        self.cut_position: int | None = None
        self.cut_announced = False
        self.served = 0  # the position of the next card to hand to a request
        self.requests: list[Request] = []  # oldest first, each with the cards it still wants
        self.request_ids: set[str] = set()
        self.unreadable_since: datetime | None = None  # the first UNREADABLE since a card
        self.unreadable = 0  # UNREADABLE reads since the last card
        self.hold: Hold | None = None
        self.held_seqs: set[int] = set()  # the reads kept while held
        self.corrected: set[str] = set()  # the coups whose cards a supervisor decided
        self.held_confirm = False  # the dealer's CONFIRM was read while held
        self.held_cut = False  # the CUT-CARD was read while held
        self.held_out = False  # the SHOE-OUT was read while held
        self.held_cards: list[str] = []  # the cards read while held
        self.void_waiting: str | None = None  # a voided coup whose dealer has not confirmed it
        self.waiting_correction: CorrectionWaitingFact | None = None  # taken at that CONFIRM
        self.closed = False

    def lift_hold(self, cut_at: int) -> None:
        """A supervisor's decision ended the hold: forget the reads kept while held (they
        stay in the store), and count reads (and unreadable ones, and a card's wait) again
        from the highest kept. A ``CUT-CARD`` kept came out in the held coup: it is before
        the card at ``cut_at``, the next dealt."""
        if self.held_cut and self.cut_position is None:
            self.cut_position = cut_at
        self.hold = None
        self.unreadable = 0
        self.unreadable_since = None
        self.held_seqs = set()
        self.held_confirm = False
        self.held_cut = False
        self.held_out = False
        self.held_cards = []
        self.void_waiting = None
        self.waiting_correction = None
        self.taken_seq = self.highest_seq

    @property
    def taking_reads(self) -> bool:
        """Whether a read of the table belongs to this shoe (else it waits for the next)."""
        return not self.closed and self.phase is not Phase.OUT

    # -- reads ----------------------------------------------------------------------
    def take(self, read: Read) -> Hold | None:
        """Take one read of the table's device; the hold it raised, if it raised one.

        A read whose ``seq`` is not past the highest taken is the same read again (not
        taken), unless the shoe is held: each read past the last one taken before the hold
        (or decided on) is then kept once, for the supervisor (a late one may fill the gap),
        up to :data:`MAX_HELD_READS`."""
        if self.closed:
            raise ShoeIsClosed(f"shoe {self.shoe_id} of table {self.table_id} is closed")
        seen = self.highest_seq is not None and read.seq <= self.highest_seq
        if self.hold is not None:
            fresh = self.taken_seq is None or read.seq > self.taken_seq
            if fresh and len(self.held_seqs) < MAX_HELD_READS and read.seq not in self.held_seqs:
                self._taken(read, None, held=True)
                waiting = self.waiting_correction
                if waiting is not None and self.held_confirm:
                    self._accepted(waiting)
            return None
        if seen:
            return None
        if self.highest_seq is not None and read.seq > self.highest_seq + 1:
            missing = f"{self.highest_seq + 1} to {read.seq - 1}"
            return self._held(read, HoldReason.GAP, f"device sequence numbers {missing} missing")
        hold = self._why_not(read)
        if hold is not None:
            return self._held(read, *hold)
        position = len(self.cards) if read.what == "card" else None
        self._taken(read, position, held=False)
        if read.what == "burn-end":
            self._burned()
        self._serve()
        return None

    def _why_not(self, read: Read) -> Hold | None:
        """Why ``read`` cannot be taken where the shoe is (None: it can)."""
        what, phase = read.what, self.phase
        malformed = _malformed(read)
        if malformed is not None:
            return Hold(HoldReason.MALFORMED_READ, f"read {read.seq} ({what}) {malformed}")
        if what == "gap":
            return Hold(
                HoldReason.GAP,
                f"device sequence numbers {read.seq} to {read.last_seq} never received",
            )
        if what == "button":
            if read.button == "SUPERVISOR":
                return Hold(HoldReason.SUPERVISOR_CALLED, "the dealer called a supervisor")
            cards = self.coup_cards
            if read.button == "CONFIRM" and cards and not coup_complete(cards):
                return Hold(
                    HoldReason.INCOMPLETE_COUP,
                    f"CONFIRM after {len(cards)} cards of a coup the tableau has not finished",
                )
            return None
        if what == "unreadable":
            if self.unreadable >= MAX_UNREADABLE:
                return Hold(
                    HoldReason.UNREADABLE_STREAK,
                    f"{self.unreadable + 1} unreadable reads in a row: the reader needs a look",
                )
            return None
        if what == "card":
            if phase not in (Phase.BURNING, Phase.DEALING):
                return Hold(HoldReason.OUT_OF_TURN, f"card {read.card} read before the burn")
            assert read.card is not None
            copies = Counter(self.cards)[read.card] + 1
            if copies > self.decks or len(self.cards) >= self.card_count:
                return Hold(
                    HoldReason.IMPOSSIBLE_CARD,
                    f"copy {copies} of {read.card} in a shoe of {self.decks} decks",
                )
            if phase is Phase.DEALING and coup_complete(self.coup_cards):
                return Hold(
                    HoldReason.UNASKED_CARD,
                    f"card {read.card} read after a complete coup of "
                    f"{len(self.coup_cards)} cards, before CONFIRM",
                )
            return None
        expected, _ = _PHASES[what]
        if what == "shoe-out" and phase is Phase.WAITING:
            return None  # the shoe before this one going out
        if phase is not expected or (what == "cut-card" and self.cut_position is not None):
            return Hold(HoldReason.OUT_OF_TURN, f"{what.upper()} read while {phase.lower()}")
        if what == "burn-end":
            return self._why_not_burned()
        if what == "shoe-out" and (self.coup_cards or self.requests):
            return Hold(
                HoldReason.SHOE_OUT_MID_COUP,
                f"SHOE-OUT with {len(self.coup_cards)} cards of a coup not confirmed"
                if self.coup_cards
                else f"SHOE-OUT before coup {self.requests[0].coup_id} was dealt",
            )
        return None

    def _why_not_burned(self) -> Hold | None:
        if not self.cards:
            return Hold(HoldReason.BAD_BURN, "BURN-END before the shown card")
        wanted = burn_count(Card.parse(self.cards[0]))
        if len(self.cards) - 1 != wanted:
            return Hold(
                HoldReason.BAD_BURN,
                f"the shown card {self.cards[0]} burns {wanted}, {len(self.cards) - 1} were read",
            )
        return None

    def _taken(self, read: Read, position: int | None, *, held: bool) -> None:
        waited = None
        if read.what == "card" and self.unreadable_since is not None and not held:
            waited = int((read.read_at - self.unreadable_since).total_seconds() * 1000)
        taken = ReadTakenFact(
            self.table_id,
            self.shoe_id,
            read.device,
            read.seq,
            read.what,
            read.card,
            read.button,
            read.last_seq,
            read.read_at,
            position,
            held,
            waited,
        )
        record(self, self.ReadTaken, taken)

    def _held(self, read: Read | None, reason: HoldReason, detail: str) -> Hold:
        if read is not None:
            self._taken(read, None, held=True)
        seq = None if read is None else read.seq
        record(self, self.Held, ShoeHeldFact(self.table_id, self.shoe_id, reason, detail, seq))
        assert self.hold is not None
        return self.hold

    def _burned(self) -> None:
        burned = CardsBurnedFact(
            table_id=self.table_id,
            shoe_id=self.shoe_id,
            shown_card=self.cards[0],
            burned_cards=self.cards[1:],
            next_position=len(self.cards),
            causation_id=None,
            correlation_id=None,
        )
        record(self, self.CardsBurned, burned)

    # -- dealing's requests ------------------------------------------------------------
    def request(
        self,
        coup_id: str,
        request_id: str,
        count: int,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
    ) -> bool:
        """Dealing wants ``count`` more cards for a coup; False for a repeated request."""
        if request_id in self.request_ids:
            return False
        if self.closed:
            raise ShoeIsClosed(f"shoe {self.shoe_id} of table {self.table_id} is closed")
        if count < 1:
            raise ShoeError(f"cannot draw {count} cards")
        requested = DrawRequestedFact(
            self.table_id, self.shoe_id, coup_id, request_id, count, causation_id, correlation_id
        )
        record(self, self.DrawRequested, requested)
        self._serve()
        if self.phase is Phase.OUT and self.requests and self.hold is None:
            detail = f"the shoe went out before coup {coup_id} was dealt (no card to deal it)"
            self._held(None, HoldReason.SHOE_OUT_MID_COUP, detail)
        return True

    def _serve(self) -> None:
        """Hand each card read and not yet handed out to the oldest request wanting one."""
        while (
            self.hold is None
            and self.requests
            and self.phase in (Phase.DEALING, Phase.OUT)
            and self.served < len(self.cards)
            and self.served != self.unconfirmed
        ):
            first, position = self.requests[0], self.served
            cut = self.cut_position
            announce = cut is not None and not self.cut_announced and position >= cut
            drawn = CardsDrawnFact(
                table_id=self.table_id,
                shoe_id=self.shoe_id,
                coup_id=first.coup_id,
                request_id=first.request_id,
                first_position=position,
                cards=[self.cards[position]],
                cut_card_position=cut if announce else None,
                causation_id=first.causation_id,
                correlation_id=first.correlation_id,
            )
            record(self, self.CardsDrawn, drawn)

    def clear(
        self,
        coup_id: str,
        reason: str,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
    ) -> None:
        """A supervisor voided ``coup_id``: owe it nothing more, put aside the cards read and
        not handed out (they were the coup's: the next coup's are read after its betting),
        lift a hold. The reads kept while held stay in the store, not dealt.

        A held coup that was begun, is not complete by the cards read before the hold, and
        whose CONFIRM was not read, is still being dealt (or its last reads are on their way):
        the hold is lifted at the dealer's CONFIRM, the reads until then kept, not dealt to
        the next coup."""
        begun = bool(self.coup_cards or self.held_cards)
        dealing = begun and not coup_complete(self.coup_cards)
        cleared = CoupClearedFact(
            self.table_id,
            self.shoe_id,
            coup_id,
            reason,
            len(self.cards),
            self.hold.reason if self.hold is not None else None,
            self.hold is not None and dealing and not (self.held_confirm or self.held_out),
            causation_id,
            correlation_id,
        )
        record(self, self.CoupCleared, cleared)

    def accept(
        self,
        coup_id: str,
        cards: list[str],
        reason: str,
        *,
        causation_id: UUID | None = None,
        correlation_id: UUID | None = None,
    ) -> str | None:
        """A supervisor decided the held coup's cards (dealing checked the decision and that
        they are a whole coup beginning with the cards it was dealt): take the ones not read,
        lift the hold, deal on; once the dealer's CONFIRM of the coup is read (until then its
        reads are kept as held ones). Why not (the shoe stays as it is), or None."""
        waiting = self.waiting_correction
        if coup_id in self.corrected or (waiting is not None and waiting.coup_id == coup_id):
            return None  # taken already
        if self.hold is None:
            return f"the shoe does not hold: coup {coup_id}'s cards are read, not decided"
        read = self.coup_cards
        if cards[: len(read)] != read:
            return f"the cards read for the coup are {' '.join(read)}, the decision's are not"
        added = cards[len(read) :]
        copies = Counter(self.cards) + Counter(added)
        if any(copies[card] > self.decks for card in added):
            return f"{' '.join(added)} would hold a card more often than {self.decks} decks do"
        decided = CorrectionWaitingFact(
            self.table_id, self.shoe_id, coup_id, cards, reason, causation_id, correlation_id
        )
        if self.held_confirm:
            self._accepted(decided)
        else:  # the dealer is still dealing it: its last reads are kept, then taken as decided
            record(self, self.CorrectionWaiting, decided)
        return None

    def _accepted(self, decided: CorrectionWaitingFact) -> None:
        assert self.hold is not None
        accepted = CardsAcceptedFact(
            self.table_id,
            self.shoe_id,
            decided.coup_id,
            decided.cards[len(self.coup_cards) :],
            len(self.cards),
            self.hold.reason,
            decided.reason,
            decided.causation_id,
            decided.correlation_id,
        )
        record(self, self.CardsAccepted, accepted)
        self._serve()

    # -- the end -----------------------------------------------------------------------
    def close(
        self, *, causation_id: UUID | None = None, correlation_id: UUID | None = None
    ) -> bool:
        """Close the shoe and publish every card read; False if it was closed already."""
        if self.closed:
            return False
        closed = StudioShoeClosedFact(
            self.table_id,
            self.shoe_id,
            list(self.cards),
            self.served,
            causation_id,
            correlation_id,
        )
        record(self, self.Closed, closed)
        return True


def _malformed(read: Read) -> str | None:
    """What a read has that its kind has not, or lacks (None: it is as PB1 has it)."""
    for field, kind in (("card", "card"), ("button", "button"), ("last_seq", "gap")):
        if (getattr(read, field) is not None) != (read.what == kind):
            return f"{'has no' if read.what == kind else 'has a'} {field}"
    if read.last_seq is not None and read.last_seq < read.seq:
        return f"ends at {read.last_seq}, before it begins"
    return None


_PHASES = {  # a signal -> the phase it is read in, and the phase after it
    "shoe-in": (Phase.WAITING, Phase.LOADED),
    "burn-start": (Phase.LOADED, Phase.BURNING),
    "burn-end": (Phase.BURNING, Phase.BURNING),  # then CardsBurned: dealing
    "cut-card": (Phase.DEALING, Phase.DEALING),
    "shoe-out": (Phase.DEALING, Phase.OUT),
}


class StudioTable(Aggregate):
    """Which studio shoe takes a table's reads, and the reads waiting for the next one."""

    class Started(StudioTableStartedFact, Aggregate.Created):
        TOPIC = StudioTableStartedFact.STORED_TOPIC

    class ShoeAttached(ShoeAttachedFact, Aggregate.Event):
        TOPIC = ShoeAttachedFact.STORED_TOPIC

        def apply(self, table: StudioTable) -> None:
            table.shoe_id = self.shoe_id
            table.waiting = []

    class ReadWaiting(ReadWaitingFact, Aggregate.Event):
        TOPIC = ReadWaitingFact.STORED_TOPIC

        def apply(self, table: StudioTable) -> None:
            table.waiting.append(Read.of(self))

    @staticmethod
    def create_id(table_id: str) -> UUID:
        return studio_table_uuid(table_id)

    @event(Started)
    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.shoe_id: str | None = None
        self.waiting: list[Read] = []

    def attach(self, shoe_id: str) -> list[Read]:
        """Route the table's reads to ``shoe_id`` from now on; the reads that waited for it."""
        waiting = list(self.waiting)
        record(self, self.ShoeAttached, ShoeAttachedFact(self.table_id, shoe_id))
        return waiting

    def wait(self, read: Read, after_seq: int | None) -> bool:
        """Keep ``read`` for the next shoe; False when it is one already kept or taken (its
        ``seq`` not past ``after_seq`` or a kept one) or too many wait already."""
        highest = max((r.last_seq or r.seq for r in self.waiting), default=after_seq)
        if highest is not None and read.seq <= highest:
            return False
        if len(self.waiting) >= MAX_WAITING_READS:
            return False
        record(self, self.ReadWaiting, ReadWaitingFact(self.table_id, *read))
        return True


def full_shoe(decks: int) -> int:
    return decks * CARDS_PER_DECK


register_stored_topics(StudioShoe, StudioTable)
