"""``punto-banco keys init|rotate|rotate-secret|show``: signing keys, keyring, shoe secret.

Every service signs what it publishes and believes only what the writer's key signed
(``services/shared/platform/security/signing.py``); the shoe encrypts each shoe's order and
salt at rest. The keys are made by ``services/tools/admin/keys.py``. ``init`` makes what
``punto-banco serve`` looks for: ``PB_SIGNING_KEY`` / ``PB_KEYRING`` /
``PB_SHOE_SECRET_KEY_FILE`` when set, else ``<data dir>/keys/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from services.shared.platform.settings import Settings

keys_app = typer.Typer(
    name="keys",
    help="The services' Ed25519 signing keys, the keyring of their public keys, and the "
    "shoe's secret key (its order and salt encrypted at rest).",
    no_args_is_help=True,
)

DATA_DIR_HELP = "Folder whose keys/ holds the keys (env PB_DATA_DIR, default ./var)."


def _settings(service: str, data_dir: Path | None) -> Settings:
    from services.shared.platform.settings import Settings, SettingsError

    try:
        return Settings.from_env(service, data_dir=data_dir)
    except SettingsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None


@keys_app.command("init")
def init_command(
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    services: str = typer.Option(
        "shoe,dealing,settlement", "--services", help="Comma-separated services to give a key."
    ),
    tables: str = typer.Option(
        "",
        "--tables",
        help="Comma-separated table ids: the new keys sign these tables' records only (a "
        "studio table's device bridge: `--services studio-bridge --tables studio-1`).",
    ),
) -> None:
    """Create a key for every service that has none, and the keyring; for the shoe also its
    secret key file (idempotent)."""
    from services.shared.platform.security import (
        KeysError,
    )
    from services.tools.admin.keys import (
        init_keys,
    )

    names = [name.strip() for name in services.split(",") if name.strip()]
    if not names:
        typer.echo("error: --services names no service", err=True)
        raise typer.Exit(2)
    settings = _settings(names[0], data_dir)
    try:
        scope = [table.strip() for table in tables.split(",") if table.strip()]
        for line in init_keys(settings, names, scope or None):
            typer.echo(line)
    except (KeysError, OSError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None


@keys_app.command("rotate")
def rotate_command(
    service: str = typer.Argument(..., help="The service that gets a new key."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
) -> None:
    """A new key for SERVICE: added to the keyring, then it replaces the private key file.

    The old public key stays in the keyring (records signed with it still verify). Restart the
    service to sign with the new key; readers take the new key id without a restart.
    """
    from services.shared.platform.security import (
        KeysError,
    )
    from services.tools.admin.keys import (
        rotate_key,
    )

    settings = _settings(service, data_dir)
    try:
        kid = rotate_key(settings)
    except (KeysError, OSError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{service}: new key {kid} in {settings.keyring_path}")
    typer.echo(f"{settings.signing_key_path} replaced: restart {service} to sign with it")


@keys_app.command("rotate-secret")
def rotate_secret_command(
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
) -> None:
    """A new secret key for the shoe, first in its key file: new shoes are encrypted with it.

    The old keys stay in the file: the shoes encrypted with them still decrypt. Restart the
    shoe to use the new key. Remove an old key only once no shoe in play was shuffled with it.
    """
    from services.shared.platform.security import (
        KeysError,
    )
    from services.tools.admin.keys import (
        rotate_secret_key,
    )

    settings = _settings("shoe", data_dir)
    try:
        kid = rotate_secret_key(settings)
    except (KeysError, OSError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"shoe: new secret key {kid} first in {settings.shoe_secret_key_path}")
    typer.echo("restart the shoe to encrypt new shoes with it (the old keys still decrypt)")


@keys_app.command("show")
def show_command(
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
) -> None:
    """Print the keyring (public keys only): what integrators verify `pb-sig` with."""
    from services.shared.platform.security import KeysError, load_keyring
    from services.tools.admin.keys import keyring_json

    settings = _settings("shoe", data_dir)
    try:
        keyring = load_keyring(settings)
    except KeysError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(keyring_json(keyring), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app)
