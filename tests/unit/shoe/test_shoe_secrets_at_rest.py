"""Each shoe's order and salt are encrypted in the shoe's store until the shoe is revealed.

The bytes on disk hold neither; a wrong key, a tampered or moved ciphertext fail loudly (the
Application does not start, or the command that needs the shoe fails: never a card dealt
from garbage); a rotated key set still opens the shoes of the old key id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.shared.platform.security.keys import SecretKeyError, SecretKeys
from services.shared.platform.settings import Settings
from services.shared.platform.store.application import FactMapper
from services.shoe.application import ShoeApplication
from services.shoe.domain import Shoe, ShoeError
from services.tools.admin.keys import env_form, init_secret_key, new_key


def key(kid: str = "shoe-secret-1") -> str:
    return env_form(SecretKeys(((kid, new_key()),), "test"))


def test_no_key_or_an_open_key_file_refuses_to_start(tmp_path: Path) -> None:
    popo = {"PERSISTENCE_MODULE": "eventsourcing.popo", "PB_SHOE_SECRET_KEY": ""}
    with pytest.raises(SecretKeyError, match="keys init"):
        ShoeApplication(env={**popo, "PB_SHOE_SECRET_KEY_FILE": ""})
    with pytest.raises(SecretKeyError, match="no secret key file"):
        ShoeApplication(env={**popo, "PB_SHOE_SECRET_KEY_FILE": str(tmp_path / "none.json")})
    settings = Settings(service="shoe", data_dir=tmp_path)
    init_secret_key(settings)
    settings.shoe_secret_key_path.chmod(0o640)
    with pytest.raises(SecretKeyError, match="open to group or others"):
        ShoeApplication(env={**popo, **settings.secret_key_env()})
    with pytest.raises(SecretKeyError, match="both"):
        ShoeApplication(env={**popo, "PB_SHOE_SECRET_KEY": key(), "PB_SHOE_SECRET_KEY_FILE": "x"})
    with pytest.raises(SecretKeyError, match="32"):
        ShoeApplication(
            env={**popo, "PB_SHOE_SECRET_KEY": "k1:AAAA", "PB_SHOE_SECRET_KEY_FILE": ""}
        )


def test_a_mapper_without_keys_refuses_to_store_a_shuffle_in_plain_text() -> None:
    app = ShoeApplication(
        env={
            "PERSISTENCE_MODULE": "eventsourcing.popo",
            "PB_SHOE_SECRET_KEY": key(),
            "PB_SHOE_SECRET_KEY_FILE": "",
        }
    )
    mapper = app.mapper
    assert isinstance(mapper, FactMapper)
    mapper.secret_keys = None
    shoe = Shoe.shuffle("t1", "s1", 1, 14)
    with pytest.raises(ValueError, match="refusing to store them in plain text"):
        mapper.to_stored_event(shoe.collect_events()[0])


def test_the_shoe_takes_no_snapshots() -> None:
    env = {"PB_SHOE_SECRET_KEY": key(), "PB_SHOE_SECRET_KEY_FILE": ""}
    with pytest.raises(ShoeError, match="no snapshots"):
        ShoeApplication(
            env={"PERSISTENCE_MODULE": "eventsourcing.popo", "IS_SNAPSHOTTING_ENABLED": "y", **env}
        )


def test_only_the_shoe_is_given_the_secret_keys_and_they_are_never_shown() -> None:
    env = {"PB_SHOE_SECRET_KEY": key()}
    shoe, dealing = Settings.from_env("shoe", env), Settings.from_env("dealing", env)
    assert shoe.eventsourcing_env()["PB_SHOE_SECRET_KEY"] == env["PB_SHOE_SECRET_KEY"]
    assert shoe.eventsourcing_env()["PB_SHOE_SECRET_KEY_FILE"] == ""
    assert not any(name.startswith("PB_SHOE") for name in dealing.eventsourcing_env())
    assert env["PB_SHOE_SECRET_KEY"].split(":")[1] not in repr(shoe)
    keys = SecretKeys((("k1", new_key()),), "x")
    assert repr(keys) == "SecretKeys(kids=('k1',), source='x')"  # ids only, never a key
    default = Settings.from_env("shoe", {"PB_DATA_DIR": "/srv/pb"}).eventsourcing_env()
    assert default["PB_SHOE_SECRET_KEY_FILE"] == "/srv/pb/keys/shoe-secret.json"
