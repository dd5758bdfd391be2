"""The demo's gateways, each with its own wallet server."""

from __future__ import annotations

from pathlib import Path

from services.dev.demo.bus import operator_of
from services.dev.demo.gateway import DemoGateway
from services.gateway.operators import OperatorRegistry


def test_each_operator_has_its_gateway_service_secrets_and_wallet(tmp_path: Path) -> None:
    gateway = DemoGateway(tmp_path, wallet_on=False, operators=("acme", "bravo"))
    gateway.prepare()
    assert gateway.env()["PB_GATEWAY_OPERATORS"] == "acme,bravo"
    registry = OperatorRegistry(tmp_path / "keys" / "operators")
    assert registry.names() == ["acme", "bravo"]
    assert {op: registry.get(op).api_secret for op in ("acme", "bravo")} == {
        op: keys.api_secret for op, keys in gateway.keys.items()
    }
    assert gateway.wallet_db("acme") != gateway.wallet_db("bravo")
    assert {operator_of(f"bettor-{n}", gateway.operators) for n in range(20)} == {"acme", "bravo"}
