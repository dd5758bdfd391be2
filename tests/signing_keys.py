"""Signing keys for the tests: one folder per test session, a key for any service asked for.

Services verify who wrote every record on a topic only one service writes (and dealing's
marks on bet-commands), so a test that starts a service, or poses as one, needs the keys the
services load: :func:`key_env` gives the ``PB_SIGNING_KEY`` / ``PB_KEYRING`` of this session's
folder (``tests/integration/platform/kafka_tools.settings_for`` adds them), and the shoe's
secret key file (``PB_SHOE_SECRET_KEY_FILE``: the shoe encrypts its orders at rest);
:func:`ensure_key` adds a service's key to it. :func:`shoe_env` is an in-memory shoe's
environment. The folder is removed when the session ends.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from services.shared.platform.settings import Settings
from services.tools.admin.keys import (
    SERVICES,
    init_keys,
)

_folder: Path | None = None


def keys_folder() -> Path:
    """This session's keys folder, made (with the three services' keys) on first use."""
    global _folder
    if _folder is None:
        _folder = Path(tempfile.mkdtemp(prefix="pb-test-keys-")) / "keys"
        atexit.register(shutil.rmtree, _folder.parent, True)
        init_keys(_settings("shoe"), SERVICES)
    return _folder


def key_env() -> dict[str, str]:
    """``PB_SIGNING_KEY`` (per service) and ``PB_KEYRING`` of this session's keys."""
    folder = keys_folder()
    return {
        "PB_SIGNING_KEY": str(folder / "{service}.pem"),
        "PB_KEYRING": str(folder / "keyring.json"),
        "PB_SHOE_SECRET_KEY_FILE": str(folder / "shoe-secret.json"),
    }


def shoe_env(**more: str) -> dict[str, str]:
    """An in-memory shoe Application's environment, with this session's secret key file."""
    return {
        "PERSISTENCE_MODULE": "eventsourcing.popo",
        "PB_SHOE_SECRET_KEY": "",
        "PB_SHOE_SECRET_KEY_FILE": key_env()["PB_SHOE_SECRET_KEY_FILE"],
        **more,
    }


def ensure_key(service: str) -> None:
    """Give ``service`` (e.g. a test's ``counter``) a key in this session's keyring."""
    init_keys(_settings(service), [service])


def _settings(service: str) -> Settings:
    return Settings.from_env(service, key_env())
