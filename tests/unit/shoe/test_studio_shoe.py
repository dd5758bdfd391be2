"""A studio table's shoe: the device's reads become the cards dealing draws, and what it
cannot deal on holds it (the shoe Application on an in-memory store, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

import pytest

from contracts import (
    SHOE_EVENTS,
    AcceptCards,
    CardDrawn,
    CardsBurned,
    ClearCoup,
    CloseShoe,
    CutCardReached,
    DrawCards,
    Message,
    ShuffleShoe,
    StudioRead,
    StudioShoeClosed,
    StudioShoeOpened,
    decode,
    encode,
)
from services.shared.platform.store.incidents import IncidentLog
from services.shoe.application import ShoeApplication
from services.shoe.messages import apply_command, to_messages
from services.shoe.studio import (
    MAX_HELD_READS,
    MAX_UNREADABLE,
    HoldReason,
    StudioShoe,
    coup_complete,
)
from tests.signing_keys import shoe_env

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
NATURAL = ["9S", "2D", "TH", "3C"]  # Player 9 against Banker 5: no third card
THIRD_CARDS = ["2C", "4D", "3H", "TC", "4C", "5H"]  # Player 5 draws a 4, Banker 4 draws on it


class Table:
    """One studio table: its shoe Application, its device's reads, what was published."""

    def __init__(self, decks: int = 1) -> None:
        self.app = ShoeApplication(env=shoe_env())
        self.seq = count(1)
        self.clock = T0
        self.requests = count(1)
        self.seen = 0
        self.decks = decks

    def command(self, message: Message) -> None:
        with self.app.unit_of_work() as uow:
            apply_command(self.app, uow, message)

    def open(self, shoe_id: str = "s1") -> None:
        self.command(
            ShuffleShoe(
                table_id="t1",
                shoe_id=shoe_id,
                decks=self.decks,
                cut_card_from_end=16,
                card_source="studio",
            )
        )

    def read(self, what: str, card: str | None = None, **fields: Any) -> None:
        self.clock += timedelta(milliseconds=500)
        seq = fields.pop("seq", None)
        if seq is None:
            seq = next(self.seq)
        else:  # the reads after it go on from it
            self.seq = count((fields.get("last_seq") or seq) + 1)
        read = StudioRead(
            table_id="t1",
            device="shoe-1",
            seq=seq,
            what=what,
            card=card,
            read_at=self.clock,
            **fields,
        )
        self.app.take_read(read)

    def cards(self, *codes: str) -> None:
        for code in codes:
            self.read("card", code)

    def burn(self, shown: str = "AH", *burned: str) -> None:
        self.read("shoe-in")
        self.read("burn-start")
        self.cards(shown, *(burned or ("2S",)))
        self.read("burn-end")

    def draw(self, coup: str, n: int, shoe_id: str = "s1") -> str:
        request = f"r{next(self.requests)}"
        self.command(
            DrawCards(table_id="t1", shoe_id=shoe_id, coup_id=coup, request_id=request, count=n)
        )
        return request

    def published(self) -> list[Message]:
        """The shoe-events published since the last call (each valid on the topic)."""
        found = self.app.recorder.select_notifications(self.seen + 1, 10_000)
        self.seen += len(found)
        out: list[Message] = []
        for notification in found:
            for message in to_messages(self.app.mapper.to_domain_event(notification)):
                out.append(decode(SHOE_EVENTS, encode(message)))
        return out

    def incidents(self) -> list[str]:
        found = self.app.recorder.select_notifications(1, 10_000)
        events = [self.app.mapper.to_domain_event(n) for n in found]
        return [e.message for e in events if isinstance(e, IncidentLog.Raised)]

    def shoe(self, shoe_id: str = "s1") -> StudioShoe:
        shoe = self.app.get_studio_shoe("t1", shoe_id)
        assert shoe is not None
        return shoe


def drawn(messages: list[Message]) -> list[tuple[int, str, str]]:
    return [(m.position, m.card, m.request_id) for m in messages if isinstance(m, CardDrawn)]


def test_the_tableau_says_when_a_coup_is_complete() -> None:
    assert coup_complete(NATURAL)
    assert not coup_complete(NATURAL[:3])
    assert not coup_complete(THIRD_CARDS[:5])
    assert coup_complete(THIRD_CARDS)


def test_the_burn_and_each_card_read_go_to_dealings_requests_in_order() -> None:
    table = Table()
    table.open()
    (opened,) = table.published()
    assert isinstance(opened, StudioShoeOpened)
    assert (opened.decks, opened.card_count) == (1, 52)
    table.burn("AH", "2S")  # an ace burns one
    (burned,) = table.published()
    assert isinstance(burned, CardsBurned)
    assert (burned.shown_card, burned.next_position) == ("AH", 2)
    assert [(b.position, b.card) for b in burned.burned] == [(1, "2S")]

    first = table.draw("c1", 4)
    assert table.published() == []  # asked for, not read yet
    table.cards(*NATURAL[:2])
    assert drawn(table.published()) == [(2, "9S", first), (3, "2D", first)]
    table.cards(*NATURAL[2:])
    table.read("button", button="CONFIRM")
    assert drawn(table.published()) == [(4, "TH", first), (5, "3C", first)]

    table.cards(*THIRD_CARDS[:4])  # read before dealing asks: they wait for the request
    assert table.published() == []
    second = table.draw("c2", 4)
    assert [p for p, _, r in drawn(table.published()) if r == second] == [6, 7, 8, 9]
    table.cards("4C")
    third = table.draw("c2", 1)
    assert drawn(table.published()) == [(10, "4C", third)]
    assert table.incidents() == []


def test_a_coups_last_card_is_handed_out_on_the_dealers_confirm_only() -> None:
    table = Table()
    table.open()
    table.burn()
    request = table.draw("c1", 4)
    table.cards(*NATURAL)  # a natural: the coup is complete with its fourth card
    assert [c for _, c, _ in drawn(table.published())] == NATURAL[:3]  # unconfirmed: it waits
    assert table.shoe().unconfirmed == 5
    table.read("button", button="CONFIRM")
    assert drawn(table.published()) == [(5, "3C", request)]
    assert table.incidents() == []


def test_a_read_again_with_its_sequence_number_is_ignored() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.published()
    table.read("card", "9S", seq=6)
    table.read("card", "9S", seq=6)  # the same read replayed
    table.read("card", "2D", seq=7)
    assert [c for _, c, _ in drawn(table.published())] == ["9S", "2D"]
    assert table.shoe().cards == ["AH", "2S", "9S", "2D"]
    assert table.incidents() == []


def test_an_unreadable_card_makes_the_coup_wait_and_the_wait_is_measured() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.published()
    table.read("unreadable")
    table.read("button", button="RESCAN")
    table.read("unreadable")  # and again
    table.read("button", button="RESCAN")
    assert drawn(table.published()) == []
    table.read("card", "9S")  # each read is 500 ms after the last
    assert [c for _, c, _ in drawn(table.published())] == ["9S"]
    events = [
        table.app.mapper.to_domain_event(n) for n in table.app.recorder.select_notifications(1, 100)
    ]
    waits = [e.waited_ms for e in events if isinstance(e, StudioShoe.ReadTaken) and e.card]
    assert waits[-1] == 2000  # from the first UNREADABLE


def hold_of(table: Table) -> HoldReason:
    hold = table.shoe().hold
    assert hold is not None
    (incident,) = table.incidents()
    assert incident.startswith(f"{hold.reason}: shoe s1 holds")
    return hold.reason


def test_a_gap_in_the_device_sequence_holds_the_shoe_and_no_card_leaves_it() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.published()
    table.cards("9S")
    table.read("gap", seq=7, last_seq=7)
    table.cards("2D", "TH")
    assert [c for _, c, _ in drawn(table.published())] == ["9S"]
    assert hold_of(table) is HoldReason.GAP
    assert table.shoe().held_seqs == {7, 8, 9}  # kept for the supervisor's decision


def test_a_read_past_the_next_sequence_number_is_a_gap_too() -> None:
    table = Table()
    table.open()
    table.burn()
    table.read("card", "9S", seq=9)
    assert hold_of(table) is HoldReason.GAP


def test_a_held_shoe_keeps_a_bounded_number_of_reads() -> None:
    table = Table()
    table.open()
    table.burn()
    table.read("button", button="SUPERVISOR")
    for _ in range(MAX_HELD_READS + 10):
        table.read("button", button="RESCAN")
    assert len(table.shoe().held_seqs) == MAX_HELD_READS
    assert hold_of(table) is HoldReason.SUPERVISOR_CALLED


@pytest.mark.parametrize(
    ("reads", "reason"),
    [
        ([("card", "AS")], HoldReason.IMPOSSIBLE_CARD),  # the one ace of spades of one deck, twice
        ([*(("card", c) for c in NATURAL), ("card", "5D")], HoldReason.UNASKED_CARD),
        ([("card", "9S"), ("card", "2D"), ("button", "CONFIRM")], HoldReason.INCOMPLETE_COUP),
        ([("card", "9S"), ("shoe-out", None)], HoldReason.SHOE_OUT_MID_COUP),
        ([("burn-start", None)], HoldReason.OUT_OF_TURN),
        ([("button", "SUPERVISOR")], HoldReason.SUPERVISOR_CALLED),
        ([("unreadable", None)] * (MAX_UNREADABLE + 1), HoldReason.UNREADABLE_STREAK),
    ],
)
def test_what_the_shoe_cannot_deal_on_holds_it(
    reads: list[tuple[str, str | None]], reason: HoldReason
) -> None:
    table = Table()
    table.open()
    table.burn("AS", "2S")
    table.draw("c1", 6)
    for what, value in reads:
        if what == "button":
            table.read(what, button=value)
        else:
            table.read(what, value)
    assert hold_of(table) is reason


def test_a_shoe_that_goes_out_before_a_coup_asked_for_is_dealt_holds() -> None:
    for asked_first in (True, False):
        table = Table()
        table.open()
        table.burn()
        table.draw("c1", 4)
        table.cards(*NATURAL)
        table.read("button", button="CONFIRM")
        if asked_first:
            table.draw("c2", 4)
        table.read("shoe-out")  # the dealer had no cards left for coup 2
        if not asked_first:
            table.draw("c2", 4)
        assert hold_of(table) is HoldReason.SHOE_OUT_MID_COUP
        assert "coup c2" in table.incidents()[-1]


def test_a_burn_other_than_the_shown_cards_holds_the_shoe() -> None:
    table = Table()
    table.open()
    table.burn("3H", "2S")  # a three burns three
    assert hold_of(table) is HoldReason.BAD_BURN
    assert [m for m in table.published() if isinstance(m, CardsBurned)] == []


def test_reads_before_the_shoe_opens_wait_for_it() -> None:
    table = Table()
    table.burn()
    table.open()
    published = table.published()
    assert [type(m) for m in published] == [StudioShoeOpened, CardsBurned]


def test_the_cut_card_comes_out_before_the_next_card_served() -> None:
    table = Table()
    table.open()
    table.burn()
    request = table.draw("c1", 4)
    table.cards("9S", "2D")
    table.read("cut-card")
    table.cards("TH", "3C")
    table.read("button", button="CONFIRM")
    published = table.published()
    kinds = [(type(m).__name__, getattr(m, "position", None)) for m in published]
    assert kinds[-3:] == [("CutCardReached", 4), ("CardDrawn", 4), ("CardDrawn", 5)]
    assert {m.request_id for m in published if isinstance(m, CardDrawn)} == {request}


def test_a_shoe_out_before_the_next_shoe_burns_is_the_last_shoe_going_out() -> None:
    table = Table()
    table.open()
    table.read("shoe-out")
    table.burn()
    assert [type(m) for m in table.published()] == [StudioShoeOpened, CardsBurned]
    assert table.incidents() == []


def test_after_the_shoe_goes_out_its_reads_wait_for_the_next_shoe() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.cards(*NATURAL)
    table.read("button", button="CONFIRM")
    table.read("shoe-out")
    table.command(CloseShoe(table_id="t1", shoe_id="s1"))
    closed = [m for m in table.published() if isinstance(m, StudioShoeClosed)]
    assert [(m.cards, m.cards_dealt) for m in closed] == [(["AH", "2S", *NATURAL], 6)]
    table.burn("AD", "3S")  # the next physical shoe, before dealing asks for it
    table.open("s2")
    assert [type(m) for m in table.published()] == [StudioShoeOpened, CardsBurned]
    assert table.shoe("s2").cards == ["AD", "3S"]
    assert table.incidents() == []


def test_a_shoe_rebuilt_from_its_events_is_the_shoe_it_was() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 6)
    table.cards(*THIRD_CARDS[:3])
    table.read("cut-card")
    shoe = table.shoe()
    assert (shoe.served, shoe.cut_position, shoe.coup_cards) == (5, 5, THIRD_CARDS[:3])
    assert [r.wanted for r in shoe.requests] == [3]


def test_the_cut_card_is_announced_with_the_first_card_behind_it_not_before() -> None:
    table = Table()
    table.open()
    table.burn()
    table.read("cut-card")
    assert not [m for m in table.published() if isinstance(m, CutCardReached)]


def test_a_voided_coup_puts_its_cards_aside_and_lifts_the_hold() -> None:
    table = Table()
    request = held_after_a_gap(table)  # the coup's CONFIRM read while held: it is dealt
    table.command(ClearCoup(table_id="t1", shoe_id="s1", coup_id="c1", reason="misdeal"))
    shoe = table.shoe()
    assert (shoe.hold, shoe.requests, shoe.coup_cards, shoe.served) == (None, [], [], 4)
    assert request not in {r.request_id for r in shoe.requests}
    request = table.draw("c2", 4)
    table.cards("5D", "6D", "7D", "8D")  # the next coup's cards, after its betting
    assert [p for p, _, r in drawn(table.published()) if r == request] == [4, 5, 6, 7]
    assert len(table.incidents()) == 1  # the gap's


def test_a_void_before_the_coups_confirm_puts_its_last_reads_aside_until_the_confirm() -> None:
    """The supervisor was quicker than the coup's last reads (the dealer still dealing it,
    or its reads on their way): they are not the next coup's cards."""
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.cards("9S")
    table.read("gap", seq=7, last_seq=7)  # the 2D never read: held
    table.published()
    table.command(ClearCoup(table_id="t1", shoe_id="s1", coup_id="c1", reason="misdeal"))
    request = table.draw("c2", 4)  # the next coup's betting closed
    table.cards("TH", "3C")  # c1's last cards, late: kept, not dealt
    table.read("cut-card")  # out in the voided coup: before the next card dealt
    assert drawn(table.published()) == []
    assert table.shoe().hold is not None
    table.read("button", button="CONFIRM")  # c1's: the dealer ends the voided coup
    table.cards("5D", "6D", "7D", "8D")
    published = table.published()
    kinds = [(type(m).__name__, getattr(m, "position", None)) for m in published]
    assert kinds[0] == ("CutCardReached", 3)
    assert [(p, c) for p, c, r in drawn(published) if r == request] == [
        (3, "5D"),
        (4, "6D"),
        (5, "7D"),
        (6, "8D"),
    ]
    assert table.shoe().hold is None and len(table.incidents()) == 1


def test_a_software_shoe_ignores_a_clear_coup() -> None:
    table = Table()
    table.command(ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=10))
    table.published()
    table.command(ClearCoup(table_id="t1", shoe_id="s1", coup_id="c1"))
    assert table.published() == []


def held_after_a_gap(table: Table) -> str:
    table.open()
    table.burn()
    request = table.draw("c1", 4)
    table.cards("9S", "2D")
    table.read("gap", seq=8, last_seq=8)  # the TH never read
    table.cards("3C")  # kept while held
    table.read("button", button="CONFIRM")  # the dealer's: the coup is dealt
    table.published()
    return request


def accept(table: Table, cards: list[str], coup: str = "c1") -> None:
    table.command(
        AcceptCards(table_id="t1", shoe_id="s1", coup_id=coup, cards=cards, reason="video")
    )


def test_a_supervisors_correction_deals_the_cards_not_read_and_lifts_the_hold() -> None:
    table = Table()
    request = held_after_a_gap(table)
    accept(table, NATURAL)
    assert drawn(table.published()) == [(4, "TH", request), (5, "3C", request)]
    shoe = table.shoe()
    assert (shoe.hold, shoe.coup_cards, shoe.unconfirmed) == (None, [], None)
    accept(table, NATURAL)  # the same decision again: nothing more
    assert table.published() == []
    next_request = table.draw("c2", 4)
    table.cards("5D", "6D", "7D", "8D")  # the next coup deals on from the next read
    table.read("button", button="CONFIRM")
    assert [p for p, _, r in drawn(table.published()) if r == next_request] == [6, 7, 8, 9]


@pytest.mark.parametrize(
    ("cards", "why"),
    [
        (["9S", "5D", "TH", "3C"], "the cards read for the coup are 9S 2D"),
        (["9S", "2D", "AH", "AH"], "more often than 1 decks"),
    ],
)
def test_a_correction_that_disagrees_with_the_shoe_is_not_taken(cards: list[str], why: str) -> None:
    table = Table()
    held_after_a_gap(table)
    accept(table, cards)
    assert table.shoe().hold is not None
    assert drawn(table.published()) == []
    assert why in table.incidents()[-1] and table.incidents()[-1].startswith("CORRECTION_REFUSED")


def test_a_correction_before_the_dealers_confirm_is_taken_at_the_confirm() -> None:
    table = Table()
    table.open()
    table.burn()
    request = table.draw("c1", 4)
    table.cards("9S", "2D")
    table.read("gap", seq=8, last_seq=8)
    table.published()
    accept(table, NATURAL)  # the supervisor decides while the dealer still deals
    table.cards("3C")  # the coup's last card: kept as held
    assert drawn(table.published()) == []
    table.read("button", button="CONFIRM")
    assert drawn(table.published()) == [(4, "TH", request), (5, "3C", request)]
    assert table.shoe().hold is None


def test_a_correction_of_a_shoe_that_does_not_hold_is_not_taken() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.cards("9S")
    accept(table, NATURAL)
    assert "does not hold" in table.incidents()[-1]
    assert table.shoe().cards == ["AH", "2S", "9S"]


def test_a_late_read_of_a_gap_decided_already_is_not_the_held_coups_confirm() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    table.cards(*NATURAL)
    table.read("gap", seq=10, last_seq=10)  # c1's CONFIRM never received: held
    table.command(ClearCoup(table_id="t1", shoe_id="s1", coup_id="c1", reason="misdeal"))
    request = table.draw("c2", 4)
    table.cards("9H", "2H")
    table.read("gap", seq=13, last_seq=13)  # the TS never read: held
    accept(table, ["9H", "2H", "TS", "3S"], coup="c2")  # decided while the dealer deals
    table.published()
    table.read("button", button="CONFIRM", seq=10)  # c1's, late into its old gap
    assert drawn(table.published()) == []  # c2 is not confirmed: nothing settles
    table.read("card", "3S", seq=14)
    table.read("button", button="CONFIRM", seq=15)  # c2's
    assert drawn(table.published()) == [(8, "TS", request), (9, "3S", request)]


def test_a_cut_card_read_while_held_comes_out_in_the_corrected_coup() -> None:
    table = Table()
    table.open()
    table.burn()
    request = table.draw("c1", 4)
    table.cards("9S", "2D")
    table.read("gap", seq=8, last_seq=8)  # the TH never read: held
    table.read("cut-card")  # kept while held
    table.cards("3C")
    table.read("button", button="CONFIRM")
    table.published()
    accept(table, NATURAL)
    published = table.published()
    kinds = [(type(m).__name__, getattr(m, "position", None)) for m in published]
    assert kinds == [("CutCardReached", 4), ("CardDrawn", 4), ("CardDrawn", 5)]
    assert {m.request_id for m in published if isinstance(m, CardDrawn)} == {request}


def test_a_supervisors_decision_starts_the_unreadable_count_and_the_wait_again() -> None:
    table = Table()
    table.open()
    table.burn()
    table.draw("c1", 4)
    for _ in range(MAX_UNREADABLE + 1):
        table.read("unreadable")
    assert hold_of(table) is HoldReason.UNREADABLE_STREAK
    table.command(ClearCoup(table_id="t1", shoe_id="s1", coup_id="c1", reason="reader"))
    table.draw("c2", 4)
    table.read("unreadable")  # the reader looked at: one card not read, re-scanned
    table.read("button", button="RESCAN")
    assert table.shoe().hold is None
    table.cards(*NATURAL)
    table.read("button", button="CONFIRM")
    assert [c for _, c, _ in drawn(table.published())] == NATURAL
    events = [
        table.app.mapper.to_domain_event(n) for n in table.app.recorder.select_notifications(1, 100)
    ]
    waits = [e.waited_ms for e in events if isinstance(e, StudioShoe.ReadTaken) and e.card]
    assert waits[-4] == 1000  # from the first UNREADABLE after the decision


@pytest.mark.parametrize(
    "fields",
    [
        {"what": "card"},  # without its card
        {"what": "button"},  # without its button
        {"what": "gap"},  # without its last sequence number
        {"what": "gap", "last_seq": 5},  # ending before it begins
        {"what": "shoe-in", "last_seq": 10**12},  # a signal with a gap's end
    ],
)
def test_a_read_not_as_its_kind_has_it_holds_the_shoe_and_fails_nothing(
    fields: dict[str, Any],
) -> None:
    table = Table()
    table.open()
    table.burn()  # sequence numbers 1 to 5
    table.draw("c1", 4)
    table.read(seq=6, **fields)
    assert hold_of(table) is HoldReason.MALFORMED_READ
    table.command(ClearCoup(table_id="t1", shoe_id="s1", coup_id="c1", reason="bad read"))
    table.draw("c2", 4)
    table.read("card", "9S", seq=7)  # the device's next read is dealt
    assert [c for _, c, _ in drawn(table.published())] == ["9S"]
