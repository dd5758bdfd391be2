"""The gateway's own settings, read from the environment with every other setting.

:class:`GatewayEnvironment` adds the gateway's variables to the platform's
(``services.shared.platform.environment.Environment``): a bad value stops the process with a
message naming the variable. The README's settings table lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field
from pydantic_settings import NoDecode

from services.shared.platform.environment import Environment, check_operators

DEFAULT_PORT = 8104


def _delays(value: object) -> object:
    """``PB_WALLET_RETRY``: comma separated seconds (``0.5,2,10,30,60``), each above 0."""
    if not isinstance(value, str):
        return value
    try:
        delays = tuple(float(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise ValueError(
            f"must be seconds separated by commas (0.5,2,10,60), got {value!r}"
        ) from None
    if not delays or any(not 0 < delay <= 3600 for delay in delays):
        raise ValueError(f"must list delays of more than 0 and at most 3600 s, got {value!r}")
    return delays


def _some_operators(value: object) -> object:
    return check_operators(value) if isinstance(value, str) and value.strip() else ()


class GatewayEnvironment(Environment):
    """The platform's variables and the gateway's."""

    gateway_operators: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_some_operators)] = (
        Field((), alias="PB_GATEWAY_OPERATORS")
    )
    gateway_port: int = Field(DEFAULT_PORT, ge=0, le=65535, alias="PB_GATEWAY_PORT")
    operators_dir: str = Field("", alias="PB_OPERATORS_DIR")
    answer_wait: float = Field(10.0, gt=0, le=3600, alias="PB_GATEWAY_ANSWER_WAIT")
    rate: float = Field(200.0, gt=0, alias="PB_GATEWAY_RATE")
    burst: int = Field(400, ge=1, alias="PB_GATEWAY_BURST")
    max_body: int = Field(4096, ge=256, le=1_048_576, alias="PB_GATEWAY_MAX_BODY")
    wallet_timeout: float = Field(5.0, gt=0, le=300, alias="PB_WALLET_TIMEOUT")
    wallet_retry: Annotated[tuple[float, ...], NoDecode, BeforeValidator(_delays)] = Field(
        (0.5, 2.0, 10.0, 30.0, 60.0), alias="PB_WALLET_RETRY"
    )
    wallet_max_in_flight: int = Field(32, ge=1, le=10_000, alias="PB_WALLET_MAX_IN_FLIGHT")
    wallet_zero_credits: bool = Field(False, alias="PB_WALLET_ZERO_CREDITS")
    wallet_silence: float = Field(60.0, gt=0, alias="PB_WALLET_SILENCE")


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """What the gateway process runs with (see :class:`GatewayEnvironment` for each)."""

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
        read = GatewayEnvironment.read(env)
        assert isinstance(read, GatewayEnvironment)
        return cls(
            operators=read.gateway_operators,
            port=read.gateway_port,
            operators_dir=Path(read.operators_dir) if read.operators_dir else None,
            answer_wait=read.answer_wait,
            rate=read.rate,
            burst=read.burst,
            max_body=read.max_body,
            wallet_timeout=read.wallet_timeout,
            wallet_retry=read.wallet_retry,
            wallet_max_in_flight=read.wallet_max_in_flight,
            wallet_zero_credits=read.wallet_zero_credits,
            wallet_silence=read.wallet_silence,
        )

    def retry_delay(self, attempt: int) -> float:
        """Seconds before try ``attempt + 1`` of a call (the last delay repeats for ever)."""
        return self.wallet_retry[min(attempt, len(self.wallet_retry)) - 1] if attempt else 0.0
