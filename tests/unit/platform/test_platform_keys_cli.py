"""``punto-banco keys`` and what ``punto-banco serve`` says without keys."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from services.tools.cli.main import app


def run(*args: str) -> tuple[int, str]:
    # keys where --data-dir says, whatever the environment running the tests names
    unset = ("PB_SIGNING_KEY", "PB_KEYRING", "PB_SHOE_SECRET_KEY_FILE", "PB_SHOE_SECRET_KEY")
    result = CliRunner().invoke(app, list(args), env=dict.fromkeys(unset, ""))
    return result.exit_code, result.output


def test_serve_without_keys_says_what_to_run(tmp_path: Path) -> None:
    code, output = run("serve", "dealing", "--data-dir", str(tmp_path))
    assert code == 2
    assert "no keyring at" in output and f"punto-banco keys init --data-dir {tmp_path}" in output


def test_keys_init_show_and_rotate(tmp_path: Path) -> None:
    code, output = run("keys", "init", "--data-dir", str(tmp_path), "--services", "shoe,dealing")
    assert code == 0, output
    assert "shoe: key shoe-1 created" in output and "dealing: key dealing-1 created" in output
    code, output = run("keys", "init", "--data-dir", str(tmp_path))
    assert code == 0 and "dealing: key dealing-1 kept" in output
    assert "settlement: key settlement-1 created" in output
    code, output = run("keys", "rotate", "dealing", "--data-dir", str(tmp_path))
    assert code == 0 and "new key dealing-2" in output, output
    code, output = run("keys", "show", "--data-dir", str(tmp_path))
    assert code == 0
    shown = json.loads(output)
    assert sorted(shown) == ["dealing-1", "dealing-2", "settlement-1", "shoe-1"]
    assert "PRIVATE" not in output


def test_keys_init_refuses_a_key_others_may_read(tmp_path: Path) -> None:
    run("keys", "init", "--data-dir", str(tmp_path))
    (tmp_path / "keys" / "shoe.pem").chmod(0o644)
    code, output = run("keys", "init", "--data-dir", str(tmp_path))
    assert code == 1 and "chmod 600" in output


def test_keys_init_makes_the_shoes_secret_key_and_rotate_secret_puts_a_new_one_first(
    tmp_path: Path,
) -> None:
    code, output = run("keys", "init", "--data-dir", str(tmp_path), "--services", "dealing")
    assert code == 0 and "secret" not in output  # only the shoe has one
    code, output = run("keys", "init", "--data-dir", str(tmp_path))
    secret = tmp_path / "keys" / "shoe-secret.json"
    assert code == 0 and f"shoe: secret key shoe-secret-1 created ({secret})" in output
    assert secret.stat().st_mode & 0o777 == 0o600
    code, output = run("keys", "rotate-secret", "--data-dir", str(tmp_path))
    assert code == 0 and "new secret key shoe-secret-2 first" in output, output
    kids = [key["kid"] for key in json.loads(secret.read_text())["keys"]]
    assert kids == ["shoe-secret-2", "shoe-secret-1"]
    code, output = run("keys", "init", "--data-dir", str(tmp_path))
    assert "shoe: secret key shoe-secret-2 kept" in output and "2 keys" in output
    secret.chmod(0o644)
    code, output = run("keys", "rotate-secret", "--data-dir", str(tmp_path))
    assert code == 1 and "chmod 600" in output
