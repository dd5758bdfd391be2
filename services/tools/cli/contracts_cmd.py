"""`punto-banco contracts`: export and check the JSON Schemas of the Kafka messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from contracts.schema import INDEX_FILE, breaking_changes, schema_documents, schema_files

contracts_app = typer.Typer(
    name="contracts",
    help="JSON Schemas of every Kafka message: export them for integrators, check them in CI.",
    no_args_is_help=True,
)
_out = Console(soft_wrap=True)
_err = Console(stderr=True, soft_wrap=True)

_DIR_ARGUMENT = typer.Argument(..., help="Directory of the schemas, e.g. contracts/schemas.")


def _is_ours(path: Path) -> bool:
    """True if ``path`` is a schema file this command wrote (safe to replace or remove)."""
    if path.name == INDEX_FILE:
        return True
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and str(document.get("$id", "")).startswith(
        "punto-banco/contracts/"
    )


def _load(directory: Path) -> dict[str, Any]:
    documents: dict[str, Any] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            documents[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            documents[path.name] = {}
    return documents


@contracts_app.command("export")
def export(directory: Path = _DIR_ARGUMENT) -> None:
    """Write one `<MessageName>.json` JSON Schema per message and index.json (topics -> types)."""
    files = schema_files()
    directory.mkdir(parents=True, exist_ok=True)
    for stale in sorted(directory.glob("*.json")):
        if stale.name not in files and _is_ours(stale):
            stale.unlink()
            _out.print(f"removed {stale} (no longer a message type)")
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    _out.print(f"wrote {len(files)} schema files to {directory}")


@contracts_app.command("check")
def check(directory: Path = _DIR_ARGUMENT) -> None:
    """Compare DIRECTORY with the current contracts; exit 1 on any difference, listing breaking
    ones."""
    if not directory.is_dir():
        _err.print(
            f"[red]{directory} is not a directory.[/red] "
            f"Run `punto-banco contracts export {directory}` to create it."
        )
        raise typer.Exit(2)
    files = schema_files()
    on_disk = {path.name: path for path in directory.glob("*.json")}
    missing = sorted(set(files) - set(on_disk))
    stale = sorted(name for name in set(on_disk) - set(files) if _is_ours(on_disk[name]))
    changed = sorted(
        name
        for name in set(files) & set(on_disk)
        if on_disk[name].read_text(encoding="utf-8") != files[name]
    )
    if not (missing or stale or changed):
        _out.print(f"[green]{len(files)} schema files in {directory} match the contracts.[/green]")
        return
    differences = (("missing", missing), ("no longer generated", stale), ("changed", changed))
    for label, names in differences:
        for name in names:
            _err.print(f"{label}: {name}")
    breaking = breaking_changes(_load(directory), schema_documents())
    if breaking:
        _err.print(f"[red]{len(breaking)} breaking change(s) against {directory}:[/red]")
        for change in breaking:
            _err.print(f"  - {change}", markup=False)
    _err.print(
        f"The schemas in {directory} differ from the contracts. If the change is deliberate "
        f"(and integrators are told), run `punto-banco contracts export {directory}`.",
        markup=False,
    )
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `contracts` sub-command to the `punto-banco` app."""
    app.add_typer(contracts_app, name="contracts")
