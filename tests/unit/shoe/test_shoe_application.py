"""The shoe Application on an in-memory store."""

from contracts import CloseShoe, DrawCards, ShuffleShoe
from services.shoe.application import ShoeApplication
from services.shoe.domain import Shoe
from services.shoe.messages import apply_command
from tests.signing_keys import shoe_env


def app() -> ShoeApplication:
    return ShoeApplication(env=shoe_env())


def test_a_repeated_shuffle_keeps_the_first_shoe() -> None:
    shoes = app()
    first = shoes.shuffle_shoe("t1", "s1", 6, 16)
    shoe = shoes.get_shoe("t1", "s1")
    assert shoe is not None
    assert shoes.shuffle_shoe("t1", "s1", 6, 16) == first
    again = shoes.get_shoe("t1", "s1")
    assert again is not None
    assert again.order == shoe.order
    assert again.burned


def test_commands_apply_inside_one_unit_of_work() -> None:
    shoes = app()
    shuffle = ShuffleShoe(table_id="t1", shoe_id="s1", decks=1, cut_card_from_end=10)
    with shoes.unit_of_work() as uow:
        apply_command(shoes, uow, shuffle)
        apply_command(
            shoes,
            uow,
            DrawCards(table_id="t1", shoe_id="s1", coup_id="c1", request_id="r1", count=4),
        )
    shoe = shoes.get_shoe("t1", "s1")
    assert shoe is not None
    assert shoe.requests["r1"][1] == 4
    with shoes.unit_of_work() as uow:
        apply_command(shoes, uow, CloseShoe(table_id="t1", shoe_id="s1"))
    closed = shoes.get_shoe("t1", "s1")
    assert closed is not None and closed.closed
    kinds = [type(e).__name__ for e in shoes.events.get(closed.id)]
    assert kinds == ["Shuffled", "CardsBurned", "CardsDrawn", "Closed"]
    shuffled = next(iter(shoes.events.get(closed.id)))
    assert isinstance(shuffled, Shoe.Shuffled)
    assert shuffled.causation_id == shuffle.event_id


def test_shoes_are_per_table() -> None:
    shoes = app()
    shoes.shuffle_shoe("t1", "s1", 1, 10)
    shoes.shuffle_shoe("t2", "s1", 1, 10)
    a, b = shoes.get_shoe("t1", "s1"), shoes.get_shoe("t2", "s1")
    assert a is not None and b is not None and a.id != b.id
