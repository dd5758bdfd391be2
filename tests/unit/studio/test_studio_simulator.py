"""The simulated shoe deals a valid shoe as a dealer does (the burn, then coup after coup as
the tableau asks, each confirmed, one coup after the cut card), each coup only when released,
and each fault does what it says to its card's read and nothing else."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.rules import ALL_CARDS, burn_count, cut_card_index, resolve_coup
from services.studio.protocol import (
    Button,
    ButtonPressed,
    CardRead,
    Event,
    Signal,
    Signalled,
    format,
    parse,
)
from services.studio.simulator import (
    DISCONNECT,
    MAX_BURN,
    MAX_COUP,
    Device,
    Disconnect,
    Fault,
    FaultRates,
    LoopbackServer,
    random_schedule,
)

Sent = Event | Disconnect


def taken(device: Device) -> list[Sent]:
    """What the device sends now, without releasing a coup."""
    steps: list[Sent] = []
    while (step := device.next_step()) is not None:
        steps.append(step)
    return steps


def sent(device: Device) -> list[Sent]:
    """Everything the device sends, every coup released."""
    device.release(len(device.order))
    return taken(device)


def words(steps: list[Sent]) -> list[str]:
    return [
        "DISCONNECT"
        if isinstance(step, Disconnect)
        else format(step).split(" ", 3)[3].removesuffix("\n")
        for step in steps
    ]


def cards_of(steps: list[Sent]) -> list[CardRead]:
    return [step for step in steps if isinstance(step, CardRead)]


def coups_of(steps: list[Sent]) -> list[list[Sent]]:
    """The lines after ``BURN-END``, cut after each ``BUTTON CONFIRM`` (the last part is what
    comes after the last coup)."""
    coups: list[list[Sent]] = [[]]
    for step in steps[words(steps).index("BURN-END") + 1 :]:
        coups[-1].append(step)
        if isinstance(step, ButtonPressed) and step.button is Button.CONFIRM:
            coups.append([])
    return coups


def device(seed: int = 7, **faults: Fault) -> Device:
    return Device(
        "shoe-1",
        faults={int(index.removeprefix("at_")): fault for index, fault in faults.items()},
        source=random.Random(seed),
    )


def check_dealt_as_a_dealer(shoe: Device, cut_card_from_end: int) -> None:
    """The burn, then coups that each take exactly the cards the tableau asks and a CONFIRM,
    the cut card where it sits, one coup after the one it came out in (when the shoe holds
    one), ``SHOE-OUT``; the cards in shoe order, each read once."""
    steps = sent(shoe)
    said = words(steps)
    burned = 1 + burn_count(shoe.order[0])
    assert said[: 3 + burned] == [
        "SHOE-IN",
        "BURN-START",
        *(f"CARD {card.code}" for card in shoe.order[:burned]),
        "BURN-END",
    ]
    *coups, after = coups_of(steps)
    assert words(after) == ["SHOE-OUT"]
    cut = cut_card_index(len(shoe.order), cut_card_from_end)
    dealt = burned
    cut_coup: int | None = None
    for number, coup in enumerate(coups):
        assert len(shoe.order) - dealt >= MAX_COUP  # a coup starts only if it can finish
        cards = [read.card for read in cards_of(coup)]
        assert cards == list(shoe.order[dealt : dealt + len(cards)])
        assert resolve_coup(cards).cards_used == len(cards)  # what the tableau asks, no more
        assert words(coup)[-1] == "BUTTON CONFIRM"
        if "CUT-CARD" in words(coup):
            at = words(coup).index("CUT-CARD")
            assert coup[at + 1] == CardRead(shoe.device, coup[at].seq + 1, shoe.order[cut])
            cut_coup = number
        dealt += len(cards)
    assert said.count("CUT-CARD") == (cut_coup is not None)
    if cut_coup is None or len(coups) == cut_coup + 1:  # the shoe could not finish another coup
        assert len(shoe.order) - dealt < MAX_COUP
    else:
        assert len(coups) == cut_coup + 2  # the coup the cut card came out in, then one more
    # each physical card of the shoe read at most once: the dealt cards are the shoe's first
    assert [read.card for read in cards_of(steps)] == list(shoe.order[:dealt])
    assert [step.seq for step in steps if isinstance(step, Event)] == list(range(1, len(steps) + 1))
    assert shoe.finished and shoe.heartbeat() == Signalled("shoe-1", len(steps), Signal.HEARTBEAT)
    assert all(parse(format(step)) == step for step in steps if isinstance(step, Event))


def test_a_shoe_of_eight_decks_is_dealt_coup_by_coup_as_the_rules_say() -> None:
    shoe = device()
    assert Counter(shoe.order) == Counter({card: 8 for card in ALL_CARDS})
    check_dealt_as_a_dealer(shoe, 16)
    coups = coups_of(sent(device()))
    cut = next(number for number, coup in enumerate(coups) if "CUT-CARD" in words(coup))
    assert cut == len(coups) - 3  # the cut card's coup, one more, then SHOE-OUT


@given(st.integers(1, 8), st.integers(0, 2**32), st.data())
def test_any_shoe_is_dealt_as_a_dealer_deals_it(decks: int, seed: int, data: st.DataObject) -> None:
    cut_card_from_end = data.draw(st.integers(1, 52 * decks - MAX_BURN), label="cut card")
    shoe = Device(decks=decks, cut_card_from_end=cut_card_from_end, source=random.Random(seed))
    check_dealt_as_a_dealer(shoe, cut_card_from_end)


def test_each_coup_waits_for_its_release_and_one_release_deals_one_coup() -> None:
    shoe = device()
    burn = taken(shoe)
    assert words(burn)[-1] == "BURN-END" and shoe.waiting  # the burn needs no release
    assert taken(shoe) == [] and shoe.waiting
    shoe.release()
    first = taken(shoe)
    assert words(first)[-1] == "BUTTON CONFIRM" and words(first).count("BUTTON CONFIRM") == 1
    assert resolve_coup([read.card for read in cards_of(first)]).cards_used == len(first) - 1
    assert shoe.waiting
    shoe.release(2)
    assert words(taken(shoe)).count("BUTTON CONFIRM") == 2 and shoe.waiting
    assert burn + first == sent(device())[: len(burn) + len(first)]
    with pytest.raises(ValueError, match="at least one coup"):
        shoe.release(0)


def test_the_random_source_decides_the_shuffle() -> None:
    assert device(seed=1).order == device(seed=1).order != device(seed=2).order
    assert Device(decks=1, cut_card_from_end=16, source=random.Random(3)).order != tuple(ALL_CARDS)


def test_without_a_source_the_shoe_is_shuffled_by_the_os_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draws: list[int] = []

    class Counting(random.SystemRandom):
        def randrange(self, *args: int) -> int:  # type: ignore[override]
            draws.append(args[0])
            return super().randrange(*args)

    monkeypatch.setattr(random, "SystemRandom", Counting)
    Device(decks=1, cut_card_from_end=16)
    assert draws == list(range(52, 1, -1))  # Fisher-Yates: one draw per card but the first


def test_decks_and_the_cut_card_are_checked() -> None:
    with pytest.raises(ValueError, match="decks"):
        Device(decks=9)
    for outside in (0, 42, 53):  # no CUT-CARD line at all; inside the longest burn
        with pytest.raises(ValueError, match="cut card must sit 1 to 41"):
            Device(decks=1, cut_card_from_end=outside)
    Device(decks=1, cut_card_from_end=41)
    with pytest.raises(ValueError, match="heartbeat > 0"):
        LoopbackServer(Device(decks=1), heartbeat=0)
    with pytest.raises(ValueError, match="coup_pause must be >= 0"):
        LoopbackServer(Device(decks=1), coup_pause=-1)


def test_an_unreadable_card_is_followed_by_a_rescan_then_read() -> None:
    clean, faulty = sent(device()), sent(device(at_20=Fault.UNREADABLE))
    card = device().order[20]
    at = [place for place, step in enumerate(clean) if isinstance(step, CardRead)][20]
    assert words(faulty)[at : at + 3] == ["UNREADABLE", "BUTTON RESCAN", f"CARD {card.code}"]
    assert isinstance(faulty[at + 1], ButtonPressed) and faulty[at + 1].button is Button.RESCAN
    assert [read.card for read in cards_of(faulty)] == [read.card for read in cards_of(clean)]


def test_a_doubled_read_is_sent_twice_with_the_same_sequence_number() -> None:
    reads, clean = cards_of(sent(device(at_30=Fault.DOUBLED))), cards_of(sent(device()))
    assert len(reads) == len(clean) + 1
    assert reads[30] == reads[31]
    assert reads[:31] + reads[32:] == clean


def test_a_dropped_read_leaves_a_gap_that_the_heartbeat_shows() -> None:
    steps, clean = sent(device(at_40=Fault.DROPPED)), cards_of(sent(device()))
    assert cards_of(steps) == clean[:40] + clean[41:]
    assert clean[40].seq not in {step.seq for step in steps if isinstance(step, Event)}  # a gap
    last = device(**{f"at_{len(clean) - 1}": Fault.DROPPED})  # the last card dealt
    steps = sent(last)
    confirm, shoe_out = steps[-2:]
    assert isinstance(confirm, ButtonPressed) and confirm.button is Button.CONFIRM
    assert isinstance(shoe_out, Signalled) and shoe_out.signal is Signal.SHOE_OUT
    assert cards_of(steps)[-1].seq == confirm.seq - 2 == last.heartbeat().seq - 3


def test_an_out_of_order_read_comes_after_the_next_line() -> None:
    clean = sent(device())
    coup_end = len(cards_of(clean[: words(clean).index("BUTTON CONFIRM")])) - 1
    for index, next_line in ((50, "CARD"), (coup_end, "BUTTON CONFIRM")):
        steps = sent(device(**{f"at_{index}": Fault.OUT_OF_ORDER}))
        late = cards_of(clean)[index]
        before = steps[steps.index(late) - 1]
        assert isinstance(before, Event) and before.seq == late.seq + 1
        assert words([before])[0].startswith(next_line)
        assert sorted(cards_of(steps), key=lambda read: read.seq) == cards_of(clean)


def test_a_disconnect_comes_before_its_card_and_the_sequence_goes_on_after_it() -> None:
    shoe = device(at_60=Fault.DISCONNECT)
    steps = sent(shoe)
    at = steps.index(DISCONNECT)
    assert [step for step in steps if step is not DISCONNECT] == sent(device())
    after = steps[at + 1]
    assert isinstance(after, CardRead) and after.card == shoe.order[60]
    assert isinstance(steps[at - 1], Event) and after.seq == steps[at - 1].seq + 1


def test_an_extra_card_is_read_after_a_complete_coup_and_before_its_confirm() -> None:
    shoe = device()
    burned = 1 + burn_count(shoe.order[0])
    asked = len(cards_of(coups_of(sent(device()))[0]))  # the cards the first coup asks for
    for extras in (1, 2):  # each card of the coup with the fault brings one more
        faulty = device(**{f"at_{burned + number}": Fault.EXTRA for number in range(extras)})
        first, second, *_ = coups_of(sent(faulty))
        cards = [read.card for read in cards_of(first)]
        assert cards == list(shoe.order[burned : burned + asked + extras])
        assert resolve_coup(cards).cards_used == asked  # complete before the extra cards
        assert words(first)[asked:] == [
            *(f"CARD {card.code}" for card in cards[asked:]),
            "BUTTON CONFIRM",
        ]
        following = [read.card for read in cards_of(second)]
        assert following[0] == shoe.order[burned + asked + extras]  # the extra left the shoe
        assert resolve_coup(following).cards_used == len(following)
    assert sent(device(at_1=Fault.EXTRA)) == sent(device())  # a burned card has no coup


def test_a_schedule_drawn_from_rates_has_each_fault_at_about_its_rate() -> None:
    rates = FaultRates(unreadable=0.1, doubled=0.05, dropped=0.05, out_of_order=0.1, extra=0.05)
    schedule = random_schedule(rates, 10_000, random.Random(5))
    counts = Counter(schedule.values())
    assert 900 < counts[Fault.UNREADABLE] < 1100 and 400 < counts[Fault.DOUBLED] < 600
    assert 400 < counts[Fault.EXTRA] < 600
    assert Fault.DISCONNECT not in counts
    assert random_schedule(FaultRates(), 416, random.Random(5)) == {}
    with pytest.raises(ValueError, match="sum to at most 1"):
        FaultRates(unreadable=0.6, dropped=0.6)
    with pytest.raises(ValueError):
        FaultRates(doubled=-0.1)


@given(st.dictionaries(st.integers(0, 51), st.sampled_from(Fault), max_size=20), st.integers())
def test_with_any_faults_every_card_is_read_once_by_seq_or_is_a_gap(
    faults: dict[int, Fault], seed: int
) -> None:
    shoe = Device(decks=1, cut_card_from_end=14, faults=faults, source=random.Random(seed))
    extras = {index: fault for index, fault in faults.items() if fault is Fault.EXTRA}
    # only the extra cards change which cards leave the shoe; the other faults change the reads
    dealt = len(
        cards_of(
            sent(Device(decks=1, cut_card_from_end=14, faults=extras, source=random.Random(seed)))
        )
    )
    inside = [fault for index, fault in faults.items() if index < dealt]
    events = [step for step in sent(shoe) if isinstance(step, Event)]
    by_seq = {event.seq: event for event in events}
    assert len(by_seq) == len(events) - inside.count(Fault.DOUBLED)
    gaps = set(range(1, shoe.latest_seq + 1)) - set(by_seq)
    assert len(gaps) == inside.count(Fault.DROPPED)
    cards = [event.card for _, event in sorted(by_seq.items()) if isinstance(event, CardRead)]
    kept = [
        card
        for index, card in enumerate(shoe.order[:dealt])
        if faults.get(index) is not Fault.DROPPED
    ]
    assert cards == kept
