"""``punto-banco operators``: an operator's secrets are made once, kept owner-only, printed as
export lines, rotated with the previous API secret still valid, and removed; a file others may
read, a name too long for a gateway service or a wallet URL with credentials is refused."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.gateway.operators import OperatorError, OperatorRegistry, service_name
from services.tools.cli.main import app


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_add_list_rotate_remove(tmp_path: Path) -> None:
    code, output = cli(
        "operators",
        "add",
        "acme",
        "--wallet-url",
        "http://w.example/pb",
        "--data-dir",
        str(tmp_path),
    )
    assert code == 0, output
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in output.splitlines()
        if line.startswith("export ")
    )
    assert exports["PB_API_OPERATOR"] == "acme" and len(exports["PB_API_SECRET"]) >= 40
    path = tmp_path / "keys" / "operators" / "acme.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert (tmp_path / "keys" / "gateway-acme.pem").exists()  # its seal anchors' key
    assert cli("operators", "add", "acme", "--data-dir", str(tmp_path))[0] == 2  # once
    assert cli("operators", "list", "--data-dir", str(tmp_path))[1] == "acme\thttp://w.example/pb\n"
    code, output = cli("operators", "rotate", "acme", "--data-dir", str(tmp_path))
    assert code == 0 and exports["PB_API_SECRET"] not in output
    keys = OperatorRegistry(path.parent).get("acme")
    assert keys.api_secrets[1] == exports["PB_API_SECRET"]  # still valid until the next one
    assert cli("operators", "remove", "acme", "--data-dir", str(tmp_path))[0] == 0
    assert not path.exists()


def test_unsafe_or_unusable_operators_are_refused(tmp_path: Path) -> None:
    registry = OperatorRegistry(tmp_path)
    registry.add("acme")
    (tmp_path / "acme.json").chmod(0o644)
    with pytest.raises(OperatorError, match="chmod 600"):
        registry.get("acme")
    with pytest.raises(OperatorError, match="24 characters"):
        service_name("a" * 25)
    assert service_name("house") == "gateway" and service_name("a" * 24) == "gateway-" + "a" * 24
    for url in ("ftp://w.example", "http://user:pw@w.example", "http://w.example/?q=1"):
        with pytest.raises(OperatorError):
            registry.add("bravo", url)
