"""``punto-banco operators add|list|remove|rotate`` and ``punto-banco serve gateway``.

An operator (a casino platform) calls the gateway's HTTP API with its API secret, and the
gateway calls its seamless wallet with its wallet secret (``services/gateway/operators.py``:
one 0600 file per operator in ``<keys folder>/operators/``). ``add`` makes the file, the
gateway's signing key for the operator (``gateway-<operator>``, for its seal anchors) and, on
the local broker of ``punto-banco infra up``, its Kafka principal ``gateway-<operator>``; it
prints the secrets as export lines (``PB_API_OPERATOR``, ``PB_API_SECRET``,
``PB_WALLET_SECRET``) for the platform's side. The operator must also be in ``PB_OPERATORS``
of dealing and settlement (its topics).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from services.gateway.operators import OperatorRegistry
    from services.shared.platform.settings import Settings

operators_app = typer.Typer(
    name="operators",
    help="The operators (casino platforms) the gateway serves: their API and wallet secrets.",
    no_args_is_help=True,
)

DATA_DIR = typer.Option(None, "--data-dir", help="Folder whose keys/ holds the operators.")


def _registry(data_dir: Path | None) -> tuple[Settings, OperatorRegistry]:
    from services.gateway.operators import OperatorRegistry
    from services.shared.platform.settings import Settings, SettingsError

    try:
        settings = Settings.from_env("gateway", data_dir=data_dir)
    except SettingsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    return settings, OperatorRegistry(settings.keys_dir / "operators")


def _fail(error: Exception) -> None:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(2)


@operators_app.command("add")
def add_command(
    name: str = typer.Argument(..., help="The operator: [a-z][a-z0-9_-], at most 24 characters."),
    wallet_url: str | None = typer.Option(
        None, "--wallet-url", help="Its seamless wallet (calls go to <url>/debit...)."
    ),
    data_dir: Path | None = DATA_DIR,
) -> None:
    """Add an operator: its secrets (printed as export lines), key and Kafka principal."""
    from services.gateway.operators import OperatorError, service_name
    from services.shared.platform.security import (
        KeysError,
    )
    from services.tools.admin.keys import (
        init_keys,
    )

    settings, registry = _registry(data_dir)
    try:
        service = service_name(name)
        password = _local_principal(service, settings.data_dir)
        keys = registry.add(name, wallet_url, password)
        for line in init_keys(settings.for_service(service), [service]):
            typer.echo(line, err=True)
    except (OperatorError, KeysError, ValueError, OSError) as error:
        _fail(error)
        return
    typer.echo(f"operator {name}: {registry.path(name)}", err=True)
    typer.echo(keys.exports(), nl=False)


def _local_principal(principal: str, data_dir: Path) -> str | None:
    """The Kafka principal on the local broker (`infra up`), made if missing: its password;
    None when there is no local broker (make it on yours: docs/security.md)."""
    try:
        from services.dev.infra.common import InfraError
        from services.dev.infra.kafka import KafkaBroker
    except ModuleNotFoundError:
        return None
    broker = KafkaBroker(home=data_dir.resolve() / "kafka")
    if broker.pid() is None:
        typer.echo(f"no local broker: create the Kafka principal {principal} on yours", err=True)
        return None
    try:
        return broker.add_principal(principal, "gateway").password
    except InfraError as error:
        typer.echo(f"no Kafka principal made ({error}): create {principal} on yours", err=True)
        return None


@operators_app.command("list")
def list_command(data_dir: Path | None = DATA_DIR) -> None:
    """The operators: name, wallet URL (no secrets)."""
    from services.gateway.operators import OperatorError

    _, registry = _registry(data_dir)
    for name in registry.names():
        try:
            keys = registry.get(name)
        except OperatorError as error:
            typer.echo(f"{name}\tunusable: {error}")
            continue
        typer.echo(f"{name}\t{keys.wallet_url or 'no wallet'}")


@operators_app.command("remove")
def remove_command(name: str, data_dir: Path | None = DATA_DIR) -> None:
    """Remove an operator's secrets (the gateway refuses its requests from its next start)."""
    from services.gateway.operators import OperatorError

    _, registry = _registry(data_dir)
    try:
        removed = registry.remove(name)
    except (OperatorError, ValueError) as error:
        _fail(error)
        return
    typer.echo(f"operator {name}: {'removed' if removed else 'was not there'}")


@operators_app.command("rotate")
def rotate_command(name: str, data_dir: Path | None = DATA_DIR) -> None:
    """New API and wallet secrets (the previous API secret works until the next rotation;
    give the wallet its new secret before restarting the gateway)."""
    from services.gateway.operators import OperatorError

    _, registry = _registry(data_dir)
    try:
        keys = registry.rotate(name)
    except (OperatorError, ValueError) as error:
        _fail(error)
        return
    typer.echo(keys.exports(), nl=False)


def serve_gateway_command(settings: Settings) -> int:
    """``punto-banco serve gateway``: the gateway process (``services/gateway/host.py``)."""
    from services.gateway.config import GatewayConfig
    from services.gateway.host import serve_gateway
    from services.gateway.operators import OperatorError
    from services.shared.platform.settings import SettingsError

    if settings.partitioned:  # the other services of the deployment may be: not the gateway
        typer.echo(
            "gateway: PB_PARTITIONED does not apply (it scales by operator, "
            "PB_GATEWAY_OPERATORS: docs/scaling.md); one service per operator",
            err=True,
        )
    try:
        config = GatewayConfig.from_env()
        return serve_gateway(settings, config)
    except (OperatorError, SettingsError) as error:
        _fail(error)
        return 2


def register(app: typer.Typer) -> None:
    app.add_typer(operators_app, name="operators")
