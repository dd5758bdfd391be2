"""Bet ids per operator kept across a restart on an SQLite file."""

from __future__ import annotations

from tests.unit.settlement.harness import (
    bet,
    settlement_app,
)
from tests.unit.settlement.test_settlement_operators import OPERATORS, Table


def test_a_restarted_settlement_keeps_bet_ids_per_operator(tmp_path: object) -> None:
    """A restarted settlement reads the bet ids' records, each of its operator."""
    from pathlib import Path

    env = {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(Path(str(tmp_path)) / "settlement.sqlite"),
        "PB_OPERATORS": ",".join(OPERATORS),
    }
    table = Table(settlement_app(env=env))
    table.open_table()
    for operator in OPERATORS:
        table.open_for(operator)
    assert table.app.place_bet(bet("b1", amount=1000), operator="acme").accepted
    table.app.close()
    again = settlement_app(env=env)
    assert again.bet_answer("b1", "acme") is not None
    assert again.bet_answer("b1", "bravo") is None
    assert again.place_bet(bet("b1", amount=5000), operator="acme").reason_code == (
        "DUPLICATE_BET_ID"
    )
    assert again.place_bet(bet("b1", amount=5000), operator="bravo").accepted
