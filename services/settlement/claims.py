"""Settlement believes cards, not claims: what it does with the shoe's cards and dealing's
``CoupResolved`` claims for a coup's bet book.

A claim is checked with the rules engine and against the cards the shoe drew for the coup
(``CardDrawn`` on shoe-events, see ``verification``) before anything is paid. A claim that
fails is an incident and the coup stays unsettled until a claim that holds (or a void) comes;
one that names cards still on their way waits in the book (at most ``MAX_PENDING_CLAIMS``).
A card appended before betting on its coup closed is refused: no genuine card leaves the
shoe while bets are taken. The card's append time is one partition leader's clock, the close
mark's another's: a card appended at most ``skew`` (``PB_BROKER_CLOCK_SKEW``) before the mark is
taken, so that brokers whose clocks disagree by that much refuse no genuine card.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from contracts import CardDrawn, CoupCorrected, CoupResolved
from services.settlement.domain import BetBook, BookStatus, CoupFacts, book_aggregate_id
from services.settlement.verification import Claim, check_claim
from services.shared.platform.store import Evidence, Origin, UnitOfWork, raise_incident

SERVICE = "settlement"
MAX_PENDING_CLAIMS = 8
"""Claims kept for a coup while the shoe's cards are awaited; more are refused at once."""


def on_card_drawn(
    uow: UnitOfWork,
    message: CardDrawn,
    appended: datetime,
    origin: Origin | None,
    skew: timedelta,
) -> None:
    book = uow.get(book_aggregate_id(message.table_id, message.coup_id), BetBook)
    if book is None or book.status in (BookStatus.SETTLED, BookStatus.VOIDED):
        return  # a coup settlement has no bets for, or that is over
    evidence = Evidence.of(message, origin)
    if book.closed_at is not None and appended < book.closed_at - skew:
        early_card(uow, book, message.position, message.card, evidence)
        return
    for position, had, new in book.note_cards([(message.position, message.card, appended)]):
        raise_incident(
            uow,
            SERVICE,
            "CONFLICTING_CARD",
            f"shoe {message.shoe_id} position {position}: {new} now, {had} before",
            table_id=message.table_id,
            coup_id=message.coup_id,
            evidence=evidence,
        )
    judge_claims(uow, book)


def early_card(
    uow: UnitOfWork, book: BetBook, position: int, card: str, evidence: Evidence | None
) -> None:
    raise_incident(
        uow,
        SERVICE,
        "UNEXPECTED_CARD",
        f"card {card} at position {position} refused: appended before betting on the coup "
        "closed (no genuine card leaves the shoe while bets are taken)",
        table_id=book.table_id,
        coup_id=book.coup_id,
        evidence=evidence,
    )


def on_coup_resolved(uow: UnitOfWork, event: CoupResolved, origin: Origin | None) -> None:
    evidence = Evidence.of(event, origin)
    book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
    claim = Claim.of(event)
    refusal = None
    if book is None:
        refusal = ("UNEXPECTED_RESOLUTION", "there is no bet book for this coup")
    elif book.status is BookStatus.VOIDED:
        return  # voided: nothing is paid, whatever the result
    elif book.status is BookStatus.SETTLED:
        if book.settled_facts() != CoupFacts(event.outcome, event.player_pair, event.banker_pair):
            refusal = ("UNEXPECTED_RESOLUTION", "the coup was settled already, on other facts")
    else:  # betting or closed: judged by the shoe's cards once the book is closed
        found = check_claim(claim, book.coup_number, book.shoe_id, claim.dealing_order)
        drawn, order = tuple(book.drawn_cards), claim.dealing_order
        complete = len(drawn) >= len(order) or drawn != order[: len(drawn)]
        if found is None and complete and book.status is BookStatus.CLOSED:
            found = check_claim(claim, book.coup_number, book.shoe_id, drawn)
            if found is None:
                book.settle(claim.coup())
        if found is not None:  # wrong whatever the shoe drew, or not what it drew
            refusal = (found.code, found.message)
        elif book.settled_facts() is not None:
            pass  # settled just now
        elif len(book.claims) >= MAX_PENDING_CLAIMS:
            refusal = ("UNEXPECTED_RESOLUTION", "too many claims for one coup")
        else:  # the mark or the shoe's cards are on their way: judged when they are in
            book.claim_result({**claim.record(), "evidence": _evidence_record(evidence)})
    if refusal is not None:
        raise_incident(
            uow,
            SERVICE,
            refusal[0],
            f"CoupResolved refused: {refusal[1]}",
            table_id=event.table_id,
            coup_id=event.coup_id,
            evidence=evidence,
        )


def on_coup_corrected(uow: UnitOfWork, event: CoupCorrected, origin: Origin | None) -> None:
    """A settled coup's result corrected by a supervisor: believed only if its cards make
    exactly the result it states (the rules engine; not the shoe's cards, which were misread),
    then every bet settled again on it and the differences recorded (``BetBook.correct``, once
    per correction). A voided coup pays nothing; a coup not settled yet cannot be corrected."""
    book = uow.get(book_aggregate_id(event.table_id, event.coup_id), BetBook)
    if book is not None and book.status is BookStatus.VOIDED:
        return
    claim = Claim.of(event)
    refusal = None
    if book is None:
        refusal = ("UNEXPECTED_RESOLUTION", "there is no bet book for this coup")
    elif book.status is not BookStatus.SETTLED:
        refusal = ("UNEXPECTED_RESOLUTION", "the coup is not settled: there is nothing to correct")
    else:
        found = check_claim(claim, book.coup_number, book.shoe_id, claim.dealing_order)
        if found is None:
            book.correct(event.correction_id, claim.coup())
        else:
            refusal = (found.code, found.message)
    if refusal is not None:
        raise_incident(
            uow,
            SERVICE,
            refusal[0],
            f"CoupCorrected refused: {refusal[1]}",
            table_id=event.table_id,
            coup_id=event.coup_id,
            evidence=Evidence.of(event, origin),
        )


def judge_claims(uow: UnitOfWork, book: BetBook) -> None:
    """Settle on the first waiting claim the shoe's cards prove; refuse those they refute.

    A claim waits while the shoe has drawn fewer cards for the coup than it names and
    those drawn so far begin its cards. Once one claim settles the coup, every other
    waiting claim is refuted."""
    if book.status is not BookStatus.CLOSED or not book.claims:
        return
    drawn = tuple(book.drawn_cards)
    refused: list[int] = []
    for index, record in enumerate(book.claims):
        claim = Claim.from_record({k: v for k, v in record.items() if k != "evidence"})
        order = claim.dealing_order
        if book.status is BookStatus.CLOSED and drawn == order[: len(drawn)] != order:
            continue  # the shoe's cards are still on their way
        if book.status is BookStatus.CLOSED:
            found = check_claim(claim, book.coup_number, book.shoe_id, drawn)
            if found is None:
                book.settle(claim.coup())
                continue
        refused.append(index)
        raise_incident(
            uow,
            SERVICE,
            "CARDS_MISMATCH" if found is None else found.code,
            "CoupResolved refused: "
            + ("the coup was settled on another claim" if found is None else found.message),
            table_id=book.table_id,
            coup_id=book.coup_id,
            evidence=_evidence(record.get("evidence")),
        )
    if refused and book.status is BookStatus.CLOSED:
        book.drop_claims(refused)


def _evidence_record(evidence: Evidence) -> dict[str, Any]:
    return {
        "message_type": evidence.message_type,
        "event_id": None if evidence.event_id is None else str(evidence.event_id),
        "topic": evidence.topic,
        "partition": evidence.partition,
        "offset": evidence.offset,
    }


def _evidence(record: dict[str, Any] | None) -> Evidence | None:
    if not record:
        return None
    event_id = record.get("event_id")
    return Evidence(
        record.get("message_type") or "CoupResolved",
        None if event_id is None else UUID(event_id),
        record.get("topic"),
        record.get("partition"),
        record.get("offset"),
    )
