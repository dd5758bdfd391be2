"""The operators a gateway serves: each one's secrets, in the keys folder.

One file per operator, ``<keys folder>/operators/<name>.json``, mode 0600 (the folder 0700):
``api_secrets`` (the API secret a platform signs its requests with; after a rotation the
previous one is still accepted until the next rotation), ``wallet_secret`` (what the gateway
signs its wallet calls with), ``wallet_url`` (none: the operator has no seamless wallet, its
players' money is its own business) and, optionally, ``kafka_password`` (the SCRAM password
of the operator's gateway principal, ``gateway-<operator>``; else the process's own login).

``punto-banco operators add|list|remove|rotate`` manage them (``services.tools.cli``); the
gateway reads them at start.
"""

from __future__ import annotations

import json
import secrets
import shlex
import stat
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from contracts import HOUSE, check_operator
from services.shared.platform.security import create_private, replace_file

MAX_GATEWAY_OPERATOR = 24
"""The longest operator name a gateway serves: its service ``gateway-<operator>`` names its
store, consumer group, key and seal anchors in at most 32 characters."""


class OperatorError(ValueError):
    """An operator file or name that cannot be used; the message says what to do."""


def service_name(operator: str) -> str:
    """The gateway service (and Kafka principal) of ``operator``: ``gateway-<operator>``, the
    house's ``gateway``."""
    check_operator(operator)
    if len(operator) > MAX_GATEWAY_OPERATOR:
        raise OperatorError(
            f"operator {operator!r} is longer than the {MAX_GATEWAY_OPERATOR} characters a "
            "gateway serves (its service gateway-<operator> has at most 32)"
        )
    return "gateway" if operator == HOUSE else f"gateway-{operator}"


def check_wallet_url(url: str) -> str:
    """An http(s) URL without credentials, query or fragment (calls go to ``<url>/debit``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OperatorError(f"the wallet URL must be http:// or https://, not {url!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise OperatorError(f"the wallet URL takes no credentials, query or fragment: {url!r}")
    return url.rstrip("/")


def new_secret() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class OperatorKeys:
    """One operator's secrets (see the module docstring)."""

    operator: str
    api_secrets: tuple[str, ...]
    wallet_secret: str
    wallet_url: str | None = None
    kafka_password: str | None = field(default=None, repr=False)

    @property
    def api_secret(self) -> str:
        """The current API secret (the first)."""
        return self.api_secrets[0]

    def exports(self) -> str:
        """The export lines ``operators add`` and ``rotate`` print."""
        lines = {
            "PB_API_OPERATOR": self.operator,
            "PB_API_SECRET": self.api_secret,
            "PB_WALLET_SECRET": self.wallet_secret,
        }
        return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in lines.items())

    def to_json(self) -> bytes:
        data = asdict(self)
        data["api_secrets"] = list(self.api_secrets)
        return (json.dumps(data, indent=2) + "\n").encode()


class OperatorRegistry:
    """The operators' files in ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, operator: str) -> Path:
        service_name(operator)
        return self.folder / f"{operator}.json"

    def add(
        self, operator: str, wallet_url: str | None = None, kafka_password: str | None = None
    ) -> OperatorKeys:
        keys = OperatorKeys(
            operator,
            (new_secret(),),
            new_secret(),
            check_wallet_url(wallet_url) if wallet_url else None,
            kafka_password,
        )
        try:
            create_private(self.path(operator), keys.to_json())
        except FileExistsError:
            raise OperatorError(
                f"operator {operator} exists already ({self.path(operator)}): "
                "`punto-banco operators rotate` gives it new secrets"
            ) from None
        return keys

    def rotate(self, operator: str) -> OperatorKeys:
        """New API and wallet secrets; the previous API secret stays valid until the next."""
        keys = self.get(operator)
        rotated = replace(
            keys, api_secrets=(new_secret(), keys.api_secret), wallet_secret=new_secret()
        )
        replace_file(self.path(operator), rotated.to_json(), 0o600)
        return rotated

    def remove(self, operator: str) -> bool:
        path = self.path(operator)
        if not path.exists():
            return False
        path.unlink()
        return True

    def names(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(path.stem for path in self.folder.glob("*.json"))

    def get(self, operator: str) -> OperatorKeys:
        path = self.path(operator)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise OperatorError(
                f"no operator {operator} ({path}): `punto-banco operators add {operator}`"
            ) from None
        except (OSError, ValueError) as error:
            raise OperatorError(f"cannot read {path}: {error}") from None
        if mode & 0o077:
            raise OperatorError(
                f"{path} is open to group or others (mode {mode:04o}): run `chmod 600 {path}` "
                f"and `punto-banco operators rotate {operator}`"
            )
        try:
            secrets_ = tuple(data["api_secrets"])
            keys = OperatorKeys(
                operator,
                secrets_,
                str(data["wallet_secret"]),
                check_wallet_url(data["wallet_url"]) if data.get("wallet_url") else None,
                data.get("kafka_password") or None,
            )
        except (KeyError, TypeError) as error:
            raise OperatorError(f"{path} lacks {error}") from None
        if (
            data.get("operator") != operator
            or not secrets_
            or not all(isinstance(s, str) and len(s) >= 16 for s in secrets_)
        ):
            raise OperatorError(f"{path} is not operator {operator}'s file")
        return keys
