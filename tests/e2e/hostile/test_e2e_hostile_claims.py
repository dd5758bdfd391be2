"""Forged facts, end to end: an attacker who can write every topic claims results, cards and
marks the services never published, while honest bettors play.

Real Kafka, the three real services as subprocesses (SQLite: the store plays no part in
these attacks). The attacker forges with the relay headers an owned topic's consumer takes
(``pb-source`` of the owner, a position past its last one). Without the writer's signing key
such a fact is a dead letter (``signature: ...``): that closes every forgery by a mere writer
of the broker. With the key (``stolen_key=True``: a stolen key, or a service gone wrong) the
fact reaches the service's own checks, which the tests of those checks exercise. Afterwards
the tables keep dealing and the ledger (tests/e2e/helpers.assert_books_clean) finds every
honest accepted bet settled exactly once with the amount the genuine cards give.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from contracts import (
    SHOE_COMMANDS,
    TABLE_EVENTS,
    BetAccepted,
    BetLimitSpec,
    BetRefunded,
    BetRejected,
    BetsClosed,
    BettingClosed,
    CardDealt,
    CardDrawn,
    CardsBurned,
    CloseBetting,
    CloseBook,
    CoupVoided,
    DrawCards,
    IncidentRaised,
    OpenBook,
    encode,
)
from services.shared.platform.settings import DEFAULT_BROKER_CLOCK_SKEW
from tests.e2e.helpers import answers, bet, betting_opened
from tests.e2e.hostile.attacker import (
    HostileSystem,
    await_dead_letter,
    await_incident,
    claim,
    dead_letters,
    incidents,
)
from tests.e2e.hostile.play import (
    accepted_all,
    books_closed,
    coup_opened,
    crowd,
    crowd_goes_on,
    finish,
    honest_bets,
    last_answer,
    pause,
    place_all,
    play_coup,
    resolved,
    settled,
    table_apart,
    until,
)

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.parametrize("store", ["sqlite"], indirect=True),
]


@pytest.mark.timeout(180)
async def test_a_forged_result_for_an_open_coup_is_an_incident_and_the_genuine_one_is_paid(
    hostile: HostileSystem,
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    honest = honest_bets(table, opened.coup_id)
    await accepted_all(hostile, honest)

    # A tie with both pairs (every bet but Player/Banker wins big), while betting is open.
    forged = claim(table, opened.coup_id, 1, opened.shoe_id, ["4H", "4D"], ["4C", "4S"])
    assert (forged.outcome, forged.player_pair, forged.banker_pair) == ("TIE", True, True)
    unsigned = forged.model_copy(update={"event_id": uuid.uuid4()})
    await hostile.attacker.forge(unsigned)  # dealing's relay headers, but not its key
    await hostile.attacker.forge(forged, stolen_key=True)  # past the signature: the rules
    bare = forged.model_copy(update={"event_id": uuid.uuid4()})
    hostile.attacker.forged.add(bare.event_id)
    await hostile.attacker.send(TABLE_EVENTS, encode(bare), key=table.encode())

    letter = await await_dead_letter(hostile, encode(unsigned), "the unsigned forged result")
    assert letter.service == "settlement" and letter.error.startswith("signature: no pb-sig")
    letter = await await_dead_letter(hostile, encode(bare), "the forged result without headers")
    assert letter.service == "settlement" and "untrusted headers" in letter.error
    # The signed one is a claim like any: nothing is paid while bets are taken, and once the
    # book is closed the shoe's cards refute it.
    await pause(hostile, 2.0)
    assert not settled(hostile, opened.coup_id), "settled on a forged claim"

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=opened.coup_id))
    incident = await await_incident(hostile, forged.event_id, "the forged result")
    assert (incident.code, incident.service) == ("CARDS_MISMATCH", "settlement")
    assert (incident.table_id, incident.coup_id) == (table, opened.coup_id)
    assert incident.evidence_type == "CoupResolved"
    assert incident.source_topic == TABLE_EVENTS and incident.offset is not None
    await until(hostile, lambda: settled(hostile, opened.coup_id), 60, "the genuine settlement")
    [genuine] = [m for m in resolved(hostile, table) if m.coup_id == opened.coup_id]
    assert genuine.event_id != forged.event_id
    for number in (2, 3):  # the table goes on
        await play_coup(hostile, table, number)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


@pytest.mark.timeout(240)
async def test_forged_results_for_a_closed_coup_are_incidents_and_the_genuine_one_is_paid(
    hostile: HostileSystem,
) -> None:
    """The shoe is down: the coup's book is closed, no card is out. Claims (signed with
    dealing's stolen key) that contradict their own cards, the tableau, the coup's number or
    shoe are refused at once; a claim that holds together waits for the shoe's cards and is
    refused when they differ."""
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    coup, shoe = opened.coup_id, opened.shoe_id
    await accepted_all(hostile, honest_bets(table, coup))

    hostile.kill("shoe")
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await until(hostile, lambda: books_closed(hostile, coup), 60, "the book closed", watch=False)

    waiting = claim(table, coup, 1, shoe, ["8H", "KD"], ["3C", "3S"])  # holds together
    refused = {
        "OUTCOME_MISMATCH": claim(
            table, coup, 1, shoe, ["KH", "9D"], ["5C", "2S"], outcome="BANKER"
        ),
        "IMPOSSIBLE_COUP": claim(
            table,
            coup,
            1,
            shoe,
            ["2H", "3D"],  # Player draws on 5: two cards each is not a coup
            ["4C", "2S"],
            player_total=5,
            banker_total=6,
            outcome="BANKER",
            natural=False,
            player_pair=False,
            banker_pair=False,
        ),
        "UNEXPECTED_RESOLUTION": claim(table, coup, 7, shoe, ["QH", "9D"], ["QC", "8S"]),
    }
    wrong_shoe = claim(table, coup, 1, f"{table}.shoe-9", ["QH", "9D"], ["QC", "8S"])
    await hostile.attacker.forge(waiting, stolen_key=True)
    for forged in (*refused.values(), wrong_shoe):
        await hostile.attacker.forge(forged, stolen_key=True)
    for code, forged in refused.items():
        incident = await await_incident(hostile, forged.event_id, f"{code}", watch=False)
        assert (incident.code, incident.coup_id) == (code, coup), incident
    shoe_incident = await await_incident(hostile, wrong_shoe.event_id, "shoe", watch=False)
    assert shoe_incident.code == "UNEXPECTED_RESOLUTION" and "shoe" in shoe_incident.message
    assert not incidents(hostile, waiting.event_id), "a claim that holds together waits for cards"
    assert not settled(hostile, coup)

    await hostile.restart("shoe")
    await until(hostile, lambda: settled(hostile, coup), 60, "the genuine settlement")
    incident = await await_incident(hostile, waiting.event_id, "the claim of cards not drawn")
    assert incident.code == "CARDS_MISMATCH", incident
    [genuine] = [m for m in resolved(hostile, table) if m.coup_id == coup]
    assert (
        genuine.player_cards != waiting.player_cards or genuine.banker_cards != waiting.banker_cards
    )
    for number in (2, 3):
        await play_coup(hostile, table, number)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


async def settled_or_refused(hostile: HostileSystem, table: str, coup: str) -> None:
    """Wait until the coup is settled, or its genuine result refused (then fail at once)."""

    def refusals() -> list[IncidentRaised]:
        genuine = {m.event_id for m in resolved(hostile, table) if m.coup_id == coup}
        return [i for i in incidents(hostile) if i.evidence_id in genuine]

    await until(
        hostile,
        lambda: settled(hostile, coup) or refusals(),
        60,
        f"coup {coup} settled (or its genuine result refused)",
    )
    assert not refusals(), f"the genuine result of {coup} was refused: {refusals()}"
    assert settled(hostile, coup)


async def _forge_cards_for_open_coup(
    hostile: HostileSystem, table: str, stolen_key: bool
) -> tuple[str, list[CardDrawn]]:
    """While the table's first coup takes bets, CardDrawn for its first two positions, with the
    request id dealing used before it added 64 random bits ("<coup>.draw-1"); signed with the
    shoe's key if ``stolen_key``; returns once they were appended longer ago than the brokers'
    clock skew settlement tolerates."""
    opened = betting_opened(hostile, table)[0]
    [burn] = [m for m in hostile.seen(CardsBurned) if m.shoe_id == opened.shoe_id][:1]
    first = burn.next_position
    forged = [
        CardDrawn(
            table_id=table,
            shoe_id=opened.shoe_id,
            coup_id=opened.coup_id,
            request_id=f"{opened.coup_id}.draw-1",
            position=first + offset,
            card=card,
        )
        for offset, card in enumerate(("9H", "9S"))
    ]
    appended = [await hostile.attacker.forge(card, stolen_key=stolen_key) for card in forged]
    # Settlement takes a card appended within PB_BROKER_CLOCK_SKEW before the close mark (two
    # brokers' clocks may disagree that much): these are forged longer than that before it.
    last = max(record.timestamp for record in appended) / 1000 + DEFAULT_BROKER_CLOCK_SKEW
    await until(hostile, lambda: time.time() > last, 10, "the forged cards older than the skew")
    return opened.coup_id, forged


@pytest.mark.timeout(180)
async def test_forged_cards_with_the_old_request_id_change_nothing_dealt(
    hostile: HostileSystem,
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    coup, forged = await _forge_cards_for_open_coup(hostile, table, stolen_key=True)
    for card in forged:
        incident = await await_incident(hostile, card.event_id, f"forged card at {card.position}")
        assert (incident.service, incident.code) == ("dealing", "UNEXPECTED_CARD"), incident
        assert "no card was asked for" in incident.message

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await until(
        hostile,
        lambda: any(m.coup_id == coup for m in resolved(hostile, table)),
        60,
        "the coup dealt",
    )
    drawn = {m.position: m.card for m in hostile.seen(CardDrawn) if m.coup_id == coup}
    dealt = {m.position: m.card for m in hostile.seen(CardDealt) if m.coup_id == coup}
    assert dealt == drawn, "dealing took a card the shoe did not draw"
    assert sorted(dealt)[0] == forged[0].position  # the shoe's cards, from where they start
    for number in (2, 3):
        await play_coup(hostile, table, number)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "stolen_key",
    [
        pytest.param(False, id="unsigned"),
        pytest.param(True, id="stolen-key"),
    ],
)
async def test_forged_cards_for_an_open_coup_do_not_keep_its_bets_from_being_settled(
    hostile: HostileSystem, stolen_key: bool
) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    await accepted_all(hostile, honest_bets(table, opened.coup_id))
    coup, forged = await _forge_cards_for_open_coup(hostile, table, stolen_key)
    for card in forged:
        if stolen_key:
            await await_incident(hostile, card.event_id, f"forged card at {card.position}")
            continue
        await until(
            hostile,
            lambda c=card: (
                {m.service for m in dead_letters(hostile, encode(c))}  # type: ignore[misc]
                >= {"dealing", "settlement"}
            ),
            30,
            f"dead letters of the unsigned card at {card.position}",
        )
        for letter in dead_letters(hostile, encode(card)):
            assert letter.error.startswith("signature: no pb-sig"), letter.error
        assert not incidents(hostile, card.event_id)

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=coup))
    await until(
        hostile,
        lambda: any(m.coup_id == coup for m in resolved(hostile, table)),
        60,
        "the coup dealt",
    )
    await settled_or_refused(hostile, table, coup)
    await play_coup(hostile, table, 2)
    await finish(hostile, driver, [table])


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "stolen_key",
    [
        pytest.param(False, id="unsigned"),
        pytest.param(True, id="stolen-key"),
    ],
)
async def test_a_forged_bets_closed_lets_no_bet_in_after_the_cards_and_the_coup_is_settled(
    hostile: HostileSystem, stolen_key: bool
) -> None:
    """BetsClosed lets dealing deal. Without settlement's key a forged one is a dead letter:
    dealing waits for settlement's own. With the key: forged while betting is open, dealing
    ignores it; forged while settlement is down (betting closed, the book not yet), dealing
    deals. Either way every bet appended after dealing's CloseBook (a bettor who saw the
    cards) is too late, and the coup is settled."""
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    first = betting_opened(hostile, table)[0]
    await accepted_all(hostile, honest_bets(table, first.coup_id))
    early = BetsClosed(table_id=table, coup_id=first.coup_id, bets=0, staked=0, currency="EUR")
    await hostile.attacker.forge(early, stolen_key=stolen_key)
    await pause(hostile, 3.0)
    assert not [m for m in hostile.seen(BettingClosed) if m.coup_id == first.coup_id]
    assert not [m for m in hostile.seen(CardDealt) if m.coup_id == first.coup_id]
    assert not [r for r in hostile.attacker.seen(SHOE_COMMANDS, "DrawCards", table.encode())]
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=first.coup_id))
    await until(hostile, lambda: settled(hostile, first.coup_id), 60, "the first coup settled")

    await until(hostile, lambda: coup_opened(hostile, table, 2), 60, "coup 2")
    second = coup_opened(hostile, table, 2)
    assert second is not None
    in_time = honest_bets(table, second.coup_id)
    await accepted_all(hostile, in_time)
    hostile.kill("settlement")
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=second.coup_id))
    await until(
        hostile,
        lambda: [m for m in hostile.seen(BettingClosed) if m.coup_id == second.coup_id],
        30,
        "betting on coup 2 closed",
        watch=False,
    )
    await pause(hostile, 2.0)
    assert not [m for m in hostile.seen(CardDealt) if m.coup_id == second.coup_id], (
        "cards dealt before settlement closed the book"
    )
    forged = BetsClosed(table_id=table, coup_id=second.coup_id, bets=0, staked=0, currency="EUR")
    await hostile.attacker.forge(forged, stolen_key=stolen_key)
    if not stolen_key:
        letter = await await_dead_letter(
            hostile, encode(forged), "the forged BetsClosed", watch=False
        )
        assert letter.service == "dealing" and letter.error.startswith("signature: "), letter
        await pause(hostile, 2.0)
        assert not [m for m in hostile.seen(CardDealt) if m.coup_id == second.coup_id], (
            "cards dealt on a BetsClosed nobody signed"
        )
        await hostile.restart("settlement")  # its own BetsClosed lets dealing deal
    await until(
        hostile,
        lambda: any(m.coup_id == second.coup_id for m in resolved(hostile, table)),
        60,
        "coup 2 dealt",
        watch=False,
    )
    [result] = [m for m in resolved(hostile, table) if m.coup_id == second.coup_id]
    winner = {"PLAYER": "player", "BANKER": "banker", "TIE": "tie"}[result.outcome]
    peeking = [bet(table, second.coup_id, f"peeker-{i}", winner, 1000) for i in range(3)]
    for command in peeking:
        await hostile.sender.send(command)
    await hostile.sender.flush()

    if stolen_key:
        await hostile.restart("settlement")
    await settled_or_refused(hostile, table, second.coup_id)
    await until(hostile, lambda: all(answers(hostile, b.bet_id) for b in peeking), 30, "answers")
    for command in peeking:
        answer = last_answer(hostile, command.bet_id)
        assert isinstance(answer, BetRejected) and answer.reason_code == "BETTING_CLOSED", answer
    await play_coup(hostile, table, 3)
    await crowd_goes_on(hostile, crowd_table)
    await finish(hostile, driver, [table])


@pytest.mark.timeout(180)
async def test_a_forged_close_book_neither_refuses_bets_in_time_nor_freezes_the_table(
    hostile: HostileSystem,
) -> None:
    """CloseBook travels on bet-commands, which every bettor's gateway may write: a forged one
    (without dealing's signature) must not end betting before dealing does."""
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    await accepted_all(hostile, honest_bets(table, opened.coup_id)[:2])
    forged = CloseBook(table_id=table, coup_id=opened.coup_id)
    await hostile.attacker.forge(forged)
    letter = await await_dead_letter(hostile, encode(forged), "the forged CloseBook")
    assert letter.service == "settlement" and letter.error.startswith("signature: "), letter
    later = honest_bets(table, opened.coup_id)[2:]
    await place_all(hostile, later)
    answered = {b.bet_id: last_answer(hostile, b.bet_id) for b in later}
    assert all(isinstance(a, BetAccepted) for a in answered.values()), answered
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=opened.coup_id))
    await until(hostile, lambda: settled(hostile, opened.coup_id), 60, "the coup settled")
    await play_coup(hostile, table, 2)
    await finish(hostile, driver, [table])


@pytest.mark.timeout(180)
async def test_a_forged_open_book_does_not_set_the_next_coups_terms(
    hostile: HostileSystem,
) -> None:
    """Coup ids are predictable (<table>.coup-<n>): an OpenBook forged for the next coup with
    the house's most generous terms must not replace dealing's."""
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    first = betting_opened(hostile, table)[0]
    generous = {
        kind: BetLimitSpec(minimum=1, maximum=10**14)
        for kind in ("player", "banker", "tie", "player_pair", "banker_pair")
    }
    forged = OpenBook(
        table_id=table,
        coup_id=f"{table}.coup-2",
        coup_number=2,
        shoe_id=first.shoe_id,
        closes_at=datetime.now(UTC) + timedelta(hours=1),
        paytable="tie-9-to-1",
        limits=generous,
        currency="EUR",
    )
    await hostile.attacker.forge(forged)
    letter = await await_dead_letter(hostile, encode(forged), "the forged OpenBook")
    assert letter.service == "settlement" and letter.error.startswith("signature: "), letter
    await accepted_all(hostile, honest_bets(table, first.coup_id))
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=first.coup_id))
    await until(hostile, lambda: coup_opened(hostile, table, 2), 60, "coup 2")
    second = coup_opened(hostile, table, 2)
    assert second is not None and second.coup_id == forged.coup_id
    whale = bet(table, second.coup_id, "whale", "banker", 10**12)
    await place_all(hostile, [*honest_bets(table, second.coup_id), whale])
    answer = last_answer(hostile, whale.bet_id)
    assert isinstance(answer, BetRejected) and answer.reason_code == "ABOVE_MAXIMUM", answer
    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=second.coup_id))
    await until(hostile, lambda: settled(hostile, second.coup_id), 60, "coup 2 settled")
    await finish(hostile, driver, [table])


@pytest.mark.timeout(180)
async def test_a_forged_draw_cards_takes_no_card_from_the_shoe(hostile: HostileSystem) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    opened = betting_opened(hostile, table)[0]
    await accepted_all(hostile, honest_bets(table, opened.coup_id))
    [burn] = [m for m in hostile.seen(CardsBurned) if m.shoe_id == opened.shoe_id][:1]
    forged = DrawCards(
        table_id=table,
        shoe_id=opened.shoe_id,
        coup_id=opened.coup_id,
        request_id="mallory-1",
        count=2,
    )
    await hostile.attacker.forge(forged)  # dealing's relay headers, not dealing's key
    letter = await await_dead_letter(hostile, encode(forged), "the forged DrawCards")
    assert letter.service == "shoe" and letter.error.startswith("signature: "), letter
    await pause(hostile, 3.0)
    stolen = [m for m in hostile.seen(CardDrawn) if m.request_id == forged.request_id]
    assert not stolen, f"the shoe drew {[(m.position, m.card) for m in stolen]} for the attacker"

    await hostile.sender.send_now(CloseBetting(table_id=table, coup_id=opened.coup_id))
    await settled_or_refused(hostile, table, opened.coup_id)
    dealt = sorted(m.position for m in hostile.seen(CardDealt) if m.coup_id == opened.coup_id)
    assert dealt[0] == burn.next_position
    await play_coup(hostile, table, 2)
    await finish(hostile, driver, [table])


@pytest.mark.timeout(180)
async def test_a_forged_void_refunds_nothing(hostile: HostileSystem) -> None:
    driver, crowd_table = await crowd(hostile)
    table = await table_apart(hostile, [crowd_table])
    first = await play_coup(hostile, table, 1)
    forged = CoupVoided(
        table_id=table,
        coup_id=first.coup_id,
        supervisor_id="mallory",
        reason="forged",
        was_resolved=True,
    )
    await hostile.attacker.forge(forged)  # dealing's relay headers, not dealing's key
    letter = await await_dead_letter(hostile, encode(forged), "the forged CoupVoided")
    assert letter.service == "settlement" and letter.error.startswith("signature: "), letter
    await pause(hostile, 3.0)
    refunds = [m for m in hostile.seen(BetRefunded) if m.coup_id == first.coup_id]
    assert not refunds, [(m.bet_id, m.adjustment) for m in refunds]
    await play_coup(hostile, table, 2)
    await finish(hostile, driver, [table])
