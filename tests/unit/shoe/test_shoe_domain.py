"""The shoe aggregate and its published messages (no I/O)."""

from collections import Counter as Tally
from itertools import count

import pytest

from contracts import (
    SHOE_EVENTS,
    CardDrawn,
    CardsBurned,
    CutCardReached,
    Message,
    ShoeClosed,
    ShoeShuffled,
    decode,
    encode,
)
from services.shared.rules import shoe as rules
from services.shared.rules.cards import Card
from services.shoe.domain import NotBurned, Shoe, ShoeExhausted, ShoeIsClosed
from services.shoe.messages import to_messages


def no_shuffle(n: int) -> int:
    return n - 1  # Fisher-Yates with j = i: the canonical order stays as it is


def published(shoe: Shoe) -> list[Message]:
    out: list[Message] = []
    for event in shoe.collect_events():
        for message in to_messages(event):
            out.append(decode(SHOE_EVENTS, encode(message)))  # every message is valid on the topic
    return out


def test_shuffle_is_a_permutation_committed_to() -> None:
    shoe = Shoe.shuffle("t1", "s1", 6, 16)
    assert Tally(shoe.order) == Tally(c.code for c in rules.composition(6))
    assert shoe.verify()
    assert shoe.cut_card_index == 312 - 16


def test_shuffled_message_carries_the_commitment_but_not_the_order() -> None:
    shoe = Shoe.shuffle("t1", "s1", 1, 10)
    (message,) = published(shoe)
    assert isinstance(message, ShoeShuffled)
    assert message.commitment == shoe.commitment
    assert message.card_count == 52
    assert message.cut_card_index == 42
    dumped = message.model_dump_json()
    assert shoe.salt not in dumped
    assert ",".join(shoe.order[:5]) not in dumped


def test_burn_shows_the_first_card_and_burns_its_value() -> None:
    shoe = Shoe.shuffle("t1", "s1", 1, 10, randbelow=no_shuffle)  # AC first: value 1
    published(shoe)
    shoe.burn()
    (message,) = published(shoe)
    assert isinstance(message, CardsBurned)
    assert message.shown_card == "AC"
    assert [(p.position, p.card) for p in message.burned] == [(1, "2C")]
    assert message.next_position == 2
    shoe.burn()  # only once
    assert published(shoe) == []


@pytest.mark.parametrize(("first", "burned"), [("9H", 9), ("KS", 10), ("TD", 10), ("AS", 1)])
def test_burn_count_follows_the_shown_card(first: str, burned: int) -> None:
    shoe = Shoe.shuffle("t1", "s1", 1, 10)
    index = shoe.order.index(first)
    shoe.order[0], shoe.order[index] = shoe.order[index], shoe.order[0]
    shoe.burn()
    assert shoe.next_position == 1 + burned


def test_draws_hand_out_cards_in_order_once_per_request() -> None:
    shoe = Shoe.shuffle("t1", "s1", 6, 16)
    shoe.burn()
    start = shoe.next_position
    published(shoe)
    assert shoe.draw("c1", "r1", 4)
    assert not shoe.draw("c1", "r1", 4)  # repeated request: nothing new
    assert shoe.draw("c1", "r2", 2)
    messages = published(shoe)
    assert all(isinstance(m, CardDrawn) for m in messages)
    drawn = [m for m in messages if isinstance(m, CardDrawn)]
    assert [m.position for m in drawn] == list(range(start, start + 6))
    assert [m.card for m in drawn] == shoe.order[start : start + 6]
    assert [m.request_id for m in drawn] == ["r1"] * 4 + ["r2"] * 2
    assert len({m.event_id for m in messages}) == 6


def test_cut_card_comes_out_once_just_before_the_first_card_behind_it() -> None:
    shoe = Shoe.shuffle("t1", "s1", 1, 14)  # cut card before position 38
    shoe.burn()
    published(shoe)
    requests = count()
    seen: list[Message] = []
    while shoe.next_position < 44:
        shoe.draw(f"c{shoe.next_position}", f"r{next(requests)}", 3)
        seen.extend(published(shoe))
    cuts = [i for i, m in enumerate(seen) if isinstance(m, CutCardReached)]
    assert len(cuts) == 1
    cut = seen[cuts[0]]
    assert isinstance(cut, CutCardReached)
    assert cut.position == 38
    after = seen[cuts[0] + 1]
    assert isinstance(after, CardDrawn)
    assert after.position == 38


def test_reveal_matches_every_card_drawn_and_the_commitment() -> None:
    shoe = Shoe.shuffle("t1", "s1", 2, 16)
    shoe.burn()
    for i in range(15):  # at most 1 + 10 burned + 75 drawn of 104 cards
        shoe.draw(f"c{i}", f"r{i}", 5)
    shoe.close()
    messages = published(shoe)
    shuffled = next(m for m in messages if isinstance(m, ShoeShuffled))
    closed = next(m for m in messages if isinstance(m, ShoeClosed))
    assert closed.commitment == shuffled.commitment
    assert rules.verify_commitment(
        [Card.parse(c) for c in closed.order], bytes.fromhex(closed.salt), shuffled.commitment
    )
    for message in messages:
        if isinstance(message, CardDrawn):
            assert closed.order[message.position] == message.card
        if isinstance(message, CardsBurned):
            assert closed.order[0] == message.shown_card
            assert all(closed.order[p.position] == p.card for p in message.burned)
    assert closed.cards_dealt == shoe.next_position


def test_a_closed_shoe_refuses_draws_and_closes_once() -> None:
    shoe = Shoe.shuffle("t1", "s1", 1, 10)
    shoe.burn()
    assert shoe.close()
    assert not shoe.close()
    with pytest.raises(ShoeIsClosed):
        shoe.draw("c1", "r1", 1)


def test_draws_need_a_burned_shoe_and_cards_left() -> None:
    shoe = Shoe.shuffle("t1", "s1", 1, 0)
    with pytest.raises(NotBurned):
        shoe.draw("c1", "r1", 1)
    shoe.burn()
    published(shoe)
    i = 0
    while shoe.cards_left:
        shoe.draw("c", f"r{i}", 6)
        i += 1
    messages = published(shoe)
    assert sum(isinstance(m, CutCardReached) for m in messages) == 1  # cut card at the very end
    with pytest.raises(ShoeExhausted):
        shoe.draw("c", "last", 1)
