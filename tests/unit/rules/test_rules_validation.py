"""Pure bet validation: each bad case rejected with the right reason."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.rules import BetLimit, BetType, RejectionReason, parse_amount, validate_bet
from services.shared.rules.validation import validate_stake

LIMITS = {bet: BetLimit(100, 10_000) for bet in BetType}
OPPOSING = (BetType.PLAYER, BetType.BANKER)


def reason(
    bet_type: str = "player",
    amount: object = 500,
    currency: str = "EUR",
    bettor: frozenset[BetType] = frozenset(),
    limits: dict[BetType, BetLimit] = LIMITS,
) -> RejectionReason | None:
    rejection = validate_bet(bet_type, amount, limits, currency, "EUR", bettor)
    if rejection is not None:
        assert rejection.message  # always says why
    return None if rejection is None else rejection.reason


def test_a_good_bet_is_accepted() -> None:
    assert reason() is None
    assert reason("banker", Decimal("100.00")) is None
    assert reason("tie", "10000") is None
    assert reason("player", bettor=frozenset({BetType.PLAYER, BetType.TIE})) is None


@pytest.mark.parametrize("bet_type", ["", "PLAYER ", "draw", "egalite", "pair"])
def test_an_unknown_bet_type_is_rejected(bet_type: str) -> None:
    assert reason(bet_type) is RejectionReason.UNKNOWN_BET_TYPE


def test_a_bet_type_the_table_does_not_offer_is_rejected_with_its_own_reason() -> None:
    limits = {BetType.PLAYER: BetLimit(1, 10), BetType.SUPER_6: BetLimit(1, 10)}
    assert reason("tie", 5, limits=limits) is RejectionReason.BET_TYPE_NOT_OFFERED
    assert reason("dragon_7", 5, limits=limits) is RejectionReason.BET_TYPE_NOT_OFFERED
    rejection = validate_bet("panda_8", 5, limits, "EUR", "EUR", ())
    assert rejection is not None and "offered: player, super_6" in rejection.message
    assert reason("dragon", 5, limits=limits) is RejectionReason.UNKNOWN_BET_TYPE


@pytest.mark.parametrize(
    "amount",
    [0, -100, True, False, 100.0, 150.5, Decimal("100.5"), "100.5", "abc", "", None,
     Decimal("NaN"), Decimal("Infinity"), "-200", [100]],
)  # fmt: skip
def test_an_amount_that_is_not_a_positive_whole_number_is_rejected(amount: object) -> None:
    assert reason(amount=amount) is RejectionReason.INVALID_AMOUNT


def test_the_table_minimum_and_maximum_apply() -> None:
    assert reason(amount=99) is RejectionReason.BELOW_MINIMUM
    assert reason(amount=100) is None
    assert reason(amount=10_000) is None
    assert reason(amount=10_001) is RejectionReason.ABOVE_MAXIMUM


def test_another_currency_is_rejected() -> None:
    assert reason(currency="USD") is RejectionReason.WRONG_CURRENCY


@pytest.mark.parametrize(("new", "held"), [("player", BetType.BANKER), ("banker", BetType.PLAYER)])
def test_player_and_banker_from_one_bettor_are_rejected(new: str, held: BetType) -> None:
    assert reason(new, bettor=frozenset({held})) is RejectionReason.OPPOSING_BETS


def test_a_side_bet_next_to_player_or_banker_is_allowed() -> None:
    held = frozenset({BetType.PLAYER, BetType.BANKER})
    assert reason("tie", bettor=held) is None
    assert reason("player_pair", bettor=held) is None


@given(st.frozensets(st.sampled_from([b for b in BetType if b not in OPPOSING])), st.data())
def test_side_bets_combine_freely(held: frozenset[BetType], data: st.DataObject) -> None:
    """Any side bet beside any others (both Dragon Bonuses, Big and Small...) and beside one
    of Player or Banker."""
    side = data.draw(st.sampled_from([b for b in BetType if b not in OPPOSING]))
    main = data.draw(st.sampled_from([frozenset(), frozenset({BetType.PLAYER})]))
    assert reason(side.value, bettor=held | main) is None


@given(st.integers(1, 10**15))
def test_every_whole_amount_within_the_limits_and_only_those_pass(amount: int) -> None:
    expected = (
        None
        if 100 <= amount <= 10_000
        else RejectionReason.BELOW_MINIMUM
        if amount < 100
        else RejectionReason.ABOVE_MAXIMUM
    )
    assert reason(amount=amount) is expected
    assert reason(amount=str(amount)) is expected
    assert reason(amount=Decimal(amount)) is expected


@given(st.decimals(allow_nan=True, allow_infinity=True))
def test_parse_amount_accepts_exactly_the_positive_whole_decimals(amount: Decimal) -> None:
    whole = (
        amount.is_finite()
        and amount == amount.to_integral_value()
        and amount > 0
        and amount.adjusted() < 30
    )
    assert parse_amount(amount) == (int(amount) if whole else None)


@given(st.integers(max_value=0))
def test_parse_amount_rejects_zero_and_negatives(amount: int) -> None:
    assert parse_amount(amount) is None


def test_parse_amount_reads_text() -> None:
    assert parse_amount("100") == 100
    assert parse_amount(" 100.00 ") == 100
    assert parse_amount("1e2") == 100
    assert parse_amount("1.5e1") == 15
    assert parse_amount("1e999999999") is None  # absurd, and rejected without building it
    assert parse_amount(10**40) == 10**40  # an int is already built; the limits reject it
    assert parse_amount("\u0661\u0660\u0660") is None  # Arabic-Indic digits: ASCII text only
    assert parse_amount("\uff11\uff10\uff10") is None  # full-width digits


def test_bet_limits_must_be_ordered_and_positive() -> None:
    with pytest.raises(ValueError):
        BetLimit(0, 10)
    with pytest.raises(ValueError):
        BetLimit(10, 5)


amounts = st.one_of(
    st.integers(-10, 10**15),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.text(max_size=60),
    st.integers(1, 10**15).map(str),
    st.sampled_from(["100.00", " 500 ", "1e3", "0", "-5", "12.5", "\u0665\u0660\u0660"]),
)


@given(
    st.sampled_from([*(bet.value for bet in BetType), "draw"]),
    amounts,
    st.sampled_from(["EUR", "USD"]),
    st.frozensets(st.sampled_from(list(BetType))),
)
def test_a_stake_parsed_once_is_judged_as_the_amount_it_came_from(
    bet_type: str, amount: object, currency: str, bettor: frozenset[BetType]
) -> None:
    """Settlement parses a PlaceBet's amount once, where it enters, and judges the stake."""
    assert validate_stake(
        bet_type, parse_amount(amount), amount, LIMITS, currency, "EUR", bettor
    ) == validate_bet(bet_type, amount, LIMITS, currency, "EUR", bettor)


def test_a_refused_amount_is_quoted_as_received_and_shortened() -> None:
    rejection = validate_stake("player", None, "x" * 100, LIMITS, "EUR", "EUR", ())
    assert rejection is not None and rejection.reason is RejectionReason.INVALID_AMOUNT
    assert f"amount {'x' * 37}... is not" in rejection.message


@pytest.mark.parametrize("char", ["\x00", "\n", "\x1b", "\u2028"])
def test_a_refused_amount_with_a_character_that_is_not_printable_is_quoted_escaped(
    char: str,
) -> None:
    """The message is stored (PostgreSQL's text refuses NUL) and read by people (a line feed or
    an escape must not reach a terminal): the amount is quoted with its escapes."""
    rejection = validate_stake("player", None, f"1{char}", LIMITS, "EUR", "EUR", ())
    assert rejection is not None and rejection.reason is RejectionReason.INVALID_AMOUNT
    assert char not in rejection.message and f"amount {f'1{char}'!r} is not" in rejection.message
