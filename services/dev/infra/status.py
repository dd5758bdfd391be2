"""What `punto-banco infra status` reports for one server."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServiceStatus:
    """What `infra status` reports for one server."""

    name: str
    running: bool
    pid: int | None = None
    port: int | None = None
    detail: str = ""
    env: dict[str, str] = field(default_factory=dict)
