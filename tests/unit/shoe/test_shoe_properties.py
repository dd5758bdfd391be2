"""Whatever the draws, the shoe hands out its order exactly once and the reveal checks out."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import CardDrawn, CutCardReached, ShoeClosed, ShoeShuffled
from services.shared.rules import shoe as rules
from services.shared.rules.cards import Card
from services.shoe.domain import Shoe
from services.shoe.messages import to_messages


@settings(max_examples=60, deadline=None)
@given(
    decks=st.integers(min_value=1, max_value=8),
    cut_from_end=st.integers(min_value=0, max_value=60),
    counts=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=80),
    repeats=st.lists(st.integers(min_value=0, max_value=79), max_size=10),
    rng=st.randoms(use_true_random=False),
    salt=st.binary(min_size=32, max_size=32),
)
def test_draws_follow_the_order_and_the_reveal_matches(
    decks: int,
    cut_from_end: int,
    counts: list[int],
    repeats: list[int],
    rng: random.Random,
    salt: bytes,
) -> None:
    # The shuffle and the salt come from hypothesis too, so a failing example replays.
    shoe = Shoe.shuffle("t1", "s1", decks, cut_from_end, randbelow=rng.randrange, salt=salt)
    shoe.burn()
    start = shoe.next_position
    for i, count in enumerate(counts):
        if shoe.cards_left == 0:
            break
        shoe.draw(f"c{i}", f"r{i}", count)
        for j in repeats:
            if j < i:
                assert not shoe.draw("c", f"r{j}", 6)  # a repeated request changes nothing
    shoe.close()
    messages = [m for e in shoe.collect_events() for m in to_messages(e)]
    shuffled = next(m for m in messages if isinstance(m, ShoeShuffled))
    reveal = next(m for m in messages if isinstance(m, ShoeClosed))
    drawn = [m for m in messages if isinstance(m, CardDrawn)]
    cuts = [m for m in messages if isinstance(m, CutCardReached)]
    assert [m.position for m in drawn] == list(range(start, start + len(drawn)))
    assert all(reveal.order[m.position] == m.card for m in drawn)
    assert rules.verify_commitment(
        [Card.parse(c) for c in reveal.order], bytes.fromhex(reveal.salt), shuffled.commitment
    )
    end = start + len(drawn)
    reached = end > shuffled.cut_card_index or (drawn and end >= shuffled.card_count)
    assert len(cuts) == (1 if reached else 0)
    assert len({m.event_id for m in messages}) == len(messages)
