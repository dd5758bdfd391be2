"""The simulated shoe deals a whole valid shoe in the order of the rules, and each fault does
what it says to its card's read and nothing else."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.rules import ALL_CARDS, burn_count
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
    Device,
    Disconnect,
    Fault,
    FaultRates,
    LoopbackServer,
    random_schedule,
)

Sent = Event | Disconnect


def sent(device: Device) -> list[Sent]:
    steps: list[Sent] = []
    while (step := device.next_step()) is not None:
        steps.append(step)
    return steps


def words(steps: list[Sent]) -> list[str]:
    return [
        "DISCONNECT"
        if isinstance(step, Disconnect)
        else format(step).split(" ", 3)[3].removesuffix("\n")
        for step in steps
    ]


def cards_of(steps: list[Sent]) -> list[CardRead]:
    return [step for step in steps if isinstance(step, CardRead)]


def device(seed: int = 7, **faults: Fault) -> Device:
    return Device(
        "shoe-1",
        faults={int(index.removeprefix("at_")): fault for index, fault in faults.items()},
        source=random.Random(seed),
    )


def test_a_shoe_of_eight_decks_is_dealt_whole_in_sequence_as_the_rules_say() -> None:
    shoe = device()
    steps = sent(shoe)
    reads = cards_of(steps)
    assert [read.card for read in reads] == list(shoe.order)
    assert Counter(shoe.order) == Counter({card: 8 for card in ALL_CARDS})
    assert len(reads) == 8 * 52
    assert [step.seq for step in steps if isinstance(step, Event)] == list(range(1, len(steps) + 1))
    assert shoe.finished and shoe.heartbeat() == Signalled("shoe-1", len(steps), Signal.HEARTBEAT)
    burned = 1 + burn_count(shoe.order[0])
    said = words(steps)
    assert said[:3] == ["SHOE-IN", "BURN-START", f"CARD {shoe.order[0].code}"]
    assert said[2 + burned] == "BURN-END"
    cut = said.index("CUT-CARD")
    assert len(cards_of(steps[cut:])) == 16  # the cut card sits 16 cards from the end
    assert said[-1] == "SHOE-OUT"
    assert all(parse(format(step)) == step for step in steps if isinstance(step, Event))


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


def test_an_unreadable_card_is_followed_by_a_rescan_then_read() -> None:
    clean, faulty = sent(device()), sent(device(at_20=Fault.UNREADABLE))
    card = device().order[20]
    at = [place for place, step in enumerate(clean) if isinstance(step, CardRead)][20]
    assert words(faulty)[at : at + 3] == ["UNREADABLE", "BUTTON RESCAN", f"CARD {card.code}"]
    assert isinstance(faulty[at + 1], ButtonPressed) and faulty[at + 1].button is Button.RESCAN
    assert [read.card for read in cards_of(faulty)] == [read.card for read in cards_of(clean)]


def test_a_doubled_read_is_sent_twice_with_the_same_sequence_number() -> None:
    reads = cards_of(sent(device(at_30=Fault.DOUBLED)))
    assert len(reads) == 8 * 52 + 1
    assert reads[30] == reads[31]
    assert [read.card for read in reads[:31] + reads[32:]] == list(device().order)


def test_a_dropped_read_leaves_a_gap_that_the_heartbeat_shows() -> None:
    shoe = device(at_40=Fault.DROPPED)
    reads = cards_of(sent(shoe))
    assert len(reads) == 8 * 52 - 1
    assert reads[40].seq == reads[39].seq + 2
    assert [read.card for read in reads] == list(shoe.order[:40] + shoe.order[41:])
    last = device(at_415=Fault.DROPPED)
    steps = sent(last)
    shoe_out = steps[-1]
    assert isinstance(shoe_out, Signalled) and shoe_out.signal is Signal.SHOE_OUT
    assert cards_of(steps)[-1].seq == shoe_out.seq - 2 == last.heartbeat().seq - 2


def test_an_out_of_order_read_comes_after_the_next_line() -> None:
    shoe = device(at_50=Fault.OUT_OF_ORDER)
    reads = cards_of(sent(shoe))
    assert [read.card for read in reads[50:52]] == [shoe.order[51], shoe.order[50]]
    assert reads[50].seq == reads[51].seq + 1
    assert sorted(reads, key=lambda read: read.seq) == cards_of(sent(device()))


def test_a_disconnect_comes_before_its_card_and_the_sequence_goes_on_after_it() -> None:
    shoe = device(at_60=Fault.DISCONNECT)
    steps = sent(shoe)
    at = steps.index(DISCONNECT)
    assert [step for step in steps if step is not DISCONNECT] == sent(device())
    after = steps[at + 1]
    assert isinstance(after, CardRead) and after.card == shoe.order[60]
    assert isinstance(steps[at - 1], Event) and after.seq == steps[at - 1].seq + 1


def test_a_schedule_drawn_from_rates_has_each_fault_at_about_its_rate() -> None:
    rates = FaultRates(unreadable=0.1, doubled=0.05, dropped=0.05, out_of_order=0.1)
    schedule = random_schedule(rates, 10_000, random.Random(5))
    counts = Counter(schedule.values())
    assert 900 < counts[Fault.UNREADABLE] < 1100 and 400 < counts[Fault.DOUBLED] < 600
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
    events = [step for step in sent(shoe) if isinstance(step, Event)]
    by_seq = {event.seq: event for event in events}
    assert len(by_seq) == len(events) - list(faults.values()).count(Fault.DOUBLED)
    gaps = set(range(1, shoe.latest_seq + 1)) - set(by_seq)
    assert len(gaps) == list(faults.values()).count(Fault.DROPPED)
    cards = [event.card for _, event in sorted(by_seq.items()) if isinstance(event, CardRead)]
    kept = [card for index, card in enumerate(shoe.order) if faults.get(index) != Fault.DROPPED]
    assert cards == kept
