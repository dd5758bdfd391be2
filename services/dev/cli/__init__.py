"""The developer commands of ``punto-banco``: ``infra``, ``up`` and ``bench`` (with the rules,
end-to-end and audit benchmark groups). Registered by ``services.tools.cli.main`` when the
developer tools are installed (a source checkout), absent from the runtime wheel."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from services.dev.cli import (
        audit_bench,  # noqa: F401  (registers the audit bench group)
        bench_cmd,
        infra_cmd,
        up_cmd,
    )

    infra_cmd.register(app)
    bench_cmd.register(app)
    up_cmd.register(app)
