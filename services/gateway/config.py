"""The gateway's own settings, read from the environment with every other setting.

Each is a field of the platform's ``Settings`` (``PB_GATEWAY_*``, ``PB_WALLET_*``,
``PB_OPERATORS_DIR``: a bad value stops the process with a message naming the variable; the
settings table of docs/operations.md lists them); :class:`GatewayConfig` is what the gateway
runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from services.shared.platform.settings import Settings

DEFAULT_PORT = 8104


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """What the gateway process runs with (see ``Settings`` for each)."""

    operators: tuple[str, ...] = ()  # () = every operator in the operators folder
    port: int | None = DEFAULT_PORT
    operators_dir: Path | None = None  # None: <keys folder>/operators
    answer_wait: float = 10.0
    rate: float = 200.0
    burst: int = 400
    max_body: int = 4096
    clock_skew: float = 300.0  # a request's timestamp may be this far from now
    wallet_timeout: float = 5.0
    wallet_retry: tuple[float, ...] = (0.5, 2.0, 10.0, 30.0, 60.0)
    wallet_max_in_flight: int = 32
    wallet_zero_credits: bool = False
    wallet_silence: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatewayConfig:
        read = Settings.from_env("gateway", env)
        return cls(
            operators=read.gateway_operators,
            port=read.gateway_port,
            operators_dir=Path(read.operators_dir) if read.operators_dir else None,
            answer_wait=read.gateway_answer_wait,
            rate=read.gateway_rate,
            burst=read.gateway_burst,
            max_body=read.gateway_max_body,
            wallet_timeout=read.wallet_timeout,
            wallet_retry=read.wallet_retry,
            wallet_max_in_flight=read.wallet_max_in_flight,
            wallet_zero_credits=read.wallet_zero_credits,
            wallet_silence=read.wallet_silence,
        )

    def retry_delay(self, attempt: int) -> float:
        """Seconds before try ``attempt + 1`` of a call (the last delay repeats for ever)."""
        return self.wallet_retry[min(attempt, len(self.wallet_retry)) - 1] if attempt else 0.0
