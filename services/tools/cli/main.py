"""The `punto-banco` command: one entry point, one sub-module per area.

Each area module exposes ``register(app)`` and adds its own commands; this
module only wires them together, so areas stay independent of each other.
"""

from __future__ import annotations

import typer
import typer.core
import typer.main

app = typer.Typer(
    name="punto-banco",
    help="Punto Banco (baccarat) casino backend: rules, services, infrastructure and audit tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Area registrations (each line owned by the module it imports).
from services.tools.cli import serve_cmd  # noqa: E402

serve_cmd.register(app)
from services.tools.cli import game  # noqa: E402

game.register(app)
from services.tools.cli import contracts_cmd  # noqa: E402

contracts_cmd.register(app)
from services.tools.cli import audit_cmd  # noqa: E402

audit_cmd.register(app)
from services.tools.cli import archive_cmd  # noqa: E402

archive_cmd.register(app)
from services.tools.cli import dashboard_cmd  # noqa: E402

dashboard_cmd.register(app)
from services.tools.cli import keys_cmd  # noqa: E402

keys_cmd.register(app)
from services.tools.cli import db_cmd  # noqa: E402

db_cmd.register(app)
from services.tools.cli import supervisor_cmd  # noqa: E402

supervisor_cmd.register(app)
from services.tools.cli import operators_cmd  # noqa: E402

operators_cmd.register(app)
from services.tools.cli import studio_cmd  # noqa: E402

studio_cmd.register(app)

try:  # the developer tools: in a source checkout, not in the runtime wheel
    from services.dev.cli import register as register_developer_commands
except ModuleNotFoundError:
    pass
else:
    register_developer_commands(app)


def commands_table() -> str:
    """docs/operations.md's command table: a row per command, from the parser's own names,
    arguments and help (its first paragraph); the developer commands marked *(dev)*."""
    rows = ["| command | what it does |", "|---|---|"]
    BAR = "\\|"  # a | in a cell

    def walk(group: typer.core.TyperGroup, prefix: str, parent: typer.Context) -> None:
        for name in group.list_commands(parent):
            command = group.get_command(parent, name)
            assert command is not None
            context = typer.Context(command, info_name=name, parent=parent)
            if isinstance(command, typer.core.TyperGroup):
                walk(command, f"{prefix}{name} ", context)
                continue
            arguments = [
                (param.name or "").upper() + ("..." if param.nargs == -1 else "")
                for param in command.params
                if param.param_type_name == "argument"
            ]
            usage = " ".join([prefix + name, *arguments])
            about = " ".join((command.help or "").split("\n\n", 1)[0].split())
            if getattr(command.callback, "__module__", "").startswith("services.dev."):
                about += " *(dev)*"
            rows.append(f"| `{usage}` | {about.replace('|', BAR)} |")

    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    walk(root, "", typer.Context(root, info_name="punto-banco"))
    return "\n".join(rows) + "\n"


def main() -> None:
    app()


if __name__ == "__main__":
    main()
