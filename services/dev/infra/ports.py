"""Loopback TCP ports: is one free, find a free one, does one answer."""

from __future__ import annotations

import socket

from services.dev.infra.common import InfraError
from services.dev.infra.processes import progress

LOOPBACK = "127.0.0.1"


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing listens on ``host``:``port`` (we could bind it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port the kernel says is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
    return port


def port_answers(port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connection to 127.0.0.1:``port`` succeeds."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout):
            return True
    except OSError:
        return False


def choose_port(
    *,
    what: str,
    requested: int | None,
    preferred: tuple[int | None, ...],
    option: str,
    avoid: frozenset[int] = frozenset(),
    host: str = LOOPBACK,
) -> int:
    """The port a server should listen on.

    ``requested`` is a port the user asked for (an option or an environment
    variable): it must be free, or this raises :class:`InfraError` saying so.
    Otherwise the first free port of ``preferred`` (the one used last time, then
    the usual default) is taken, and failing those any free port.
    """
    if requested:
        if not 0 < requested < 65536:
            raise InfraError(
                f"{what}: port {requested} is not a TCP port.", f"use 1..65535 {option}"
            )
        if not port_is_free(requested, host):
            raise InfraError(
                f"{what}: port {requested} on {host} is already in use by another program.",
                f"stop that program, or choose another port with {option} "
                "(0 or unset picks a free one).",
            )
        return requested
    for port in preferred:
        if port and port not in avoid and port_is_free(port, host):
            return port
    while True:
        port = free_port()
        if port not in avoid and port_is_free(port, host):
            break
    busy = [str(port) for port in preferred if port]
    if busy:
        progress(f"{what}: port {' and '.join(busy)} busy, using free port {port} instead")
    return port
