"""Key files (services/shared/platform/security/keys.py) and the settings that find them: private
keys 0600 in a 0700 folder, refused when others may read them; init is idempotent; rotation
keeps the old public key; a service without its key or keyring is told what to run."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from services.shared.platform.security import Where, verify
from services.shared.platform.security.keys import (
    KeysError,
    load_keyring,
    load_private_key,
    signer_for,
)
from services.shared.platform.settings import Settings
from services.tools.admin.keys import (
    init_keys,
    rotate_key,
)


def settings(tmp_path: Path, service: str = "dealing", **env: str) -> Settings:
    return Settings.from_env(service, {"PB_DATA_DIR": str(tmp_path), **env})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_live_under_the_data_dir_unless_the_environment_names_them(tmp_path: Path) -> None:
    default = settings(tmp_path)
    assert default.signing_key_path == tmp_path / "keys" / "dealing.pem"
    assert default.keyring_path == tmp_path / "keys" / "keyring.json"
    named = settings(tmp_path, PB_SIGNING_KEY="/s/{service}.pem", PB_KEYRING="/s/ring.json")
    assert named.signing_key_path == Path("/s/dealing.pem")
    assert named.for_service("shoe").signing_key_path == Path("/s/shoe.pem")
    assert named.keyring_path == Path("/s/ring.json")


def test_init_makes_private_keys_and_a_keyring_and_is_idempotent(tmp_path: Path) -> None:
    done = init_keys(settings(tmp_path))
    folder = tmp_path / "keys"
    assert mode(folder) == 0o700
    for service in ("shoe", "dealing", "settlement"):
        assert mode(folder / f"{service}.pem") == 0o600
    keyring = json.loads((folder / "keyring.json").read_text())
    assert {kid: entry["service"] for kid, entry in keyring.items()} == {
        "shoe-1": "shoe",
        "dealing-1": "dealing",
        "settlement-1": "settlement",
    }
    assert any("created" in line for line in done)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    again = init_keys(settings(tmp_path))
    assert all("kept" in line for line in again)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_init_adds_a_key_the_keyring_lacks(tmp_path: Path) -> None:
    init_keys(settings(tmp_path), ["dealing"])
    (tmp_path / "keys" / "keyring.json").write_text("{}")
    assert init_keys(settings(tmp_path), ["dealing"])[0].startswith(
        "dealing: key dealing-1 added to the keyring"
    )
    s = settings(tmp_path)
    assert signer_for(s, load_keyring(s)).kid == "dealing-1"


def test_one_key_file_for_several_services_is_refused(tmp_path: Path) -> None:
    shared = settings(tmp_path, PB_SIGNING_KEY=str(tmp_path / "one.pem"))
    with pytest.raises(KeysError, match=r"put \{service\} in it"):
        init_keys(shared)


def test_a_key_that_others_may_read_is_refused(tmp_path: Path) -> None:
    init_keys(settings(tmp_path), ["dealing"])
    path = tmp_path / "keys" / "dealing.pem"
    for loose in (0o640, 0o604, 0o660):
        path.chmod(loose)
        with pytest.raises(KeysError, match=f"open to group or others \\(mode 0{loose:o}\\)"):
            load_private_key(path)
        s = settings(tmp_path)
        with pytest.raises(KeysError, match="chmod 600"):
            signer_for(s, load_keyring(s))
    path.chmod(0o600)
    load_private_key(path)


def test_a_service_without_its_key_or_keyring_is_told_what_to_run(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with pytest.raises(
        KeysError, match=f"no keyring at .*punto-banco keys init --data-dir {tmp_path}"
    ):
        load_keyring(s)
    init_keys(s, ["shoe"])  # a keyring, but no key for dealing
    with pytest.raises(KeysError, match=r"no signing key at .*punto-banco keys init"):
        signer_for(s, load_keyring(s))
    other = tmp_path / "other"
    init_keys(settings(other), ["dealing"])  # a key the keyring does not know
    (tmp_path / "keys" / "dealing.pem").write_bytes((other / "keys" / "dealing.pem").read_bytes())
    (tmp_path / "keys" / "dealing.pem").chmod(0o600)
    with pytest.raises(KeysError, match=r"is not in the keyring .* as a key of dealing"):
        signer_for(s, load_keyring(s))


def test_a_key_of_another_service_is_not_this_service_s(tmp_path: Path) -> None:
    init_keys(settings(tmp_path))
    shoe_key = (tmp_path / "keys" / "shoe.pem").read_bytes()
    (tmp_path / "keys" / "dealing.pem").write_bytes(shoe_key)
    s = settings(tmp_path)
    with pytest.raises(KeysError, match="not in the keyring"):
        signer_for(s, load_keyring(s))


def test_rotation_signs_with_a_new_key_and_the_old_one_still_verifies(tmp_path: Path) -> None:
    s = settings(tmp_path)
    init_keys(s)
    old = signer_for(s, load_keyring(s))
    where = Where("cluster", "punto-banco.table-events", 0)
    signed_before = old.sign(where, b"t1", b"{}", 1, 0)
    assert rotate_key(s) == "dealing-2"
    assert mode(s.signing_key_path) == 0o600
    keyring = load_keyring(s)
    new = signer_for(s, keyring)
    assert (old.kid, new.kid) == ("dealing-1", "dealing-2")
    signed_after = new.sign(where, b"t1", b"{}", 2, 0)
    for position, header in ((1, signed_before), (2, signed_after)):
        assert verify(keyring, "dealing", where, b"t1", b"{}", position, 0, header) is None
    assert rotate_key(s) == "dealing-3"


def test_a_bridge_key_made_for_a_table_signs_for_it_alone_and_its_rotation_too(
    tmp_path: Path,
) -> None:
    s = settings(tmp_path, "studio-bridge")
    init_keys(s, ["studio-bridge"], ["studio-1"])
    rotate_key(s)
    keyring = load_keyring(s)
    assert [e.tables for e in keyring.entries()] == [frozenset({"studio-1"})] * 2
    signer = signer_for(s, keyring)
    where = Where("cluster", "punto-banco.studio-reads", 0)
    for table, refused in ((b"studio-1", False), (b"studio-2", True)):
        header = signer.sign(where, table, b"{}", 1, 0)
        why = verify(keyring, "studio-bridge", where, table, b"{}", 1, 0, header)
        assert (why is not None) is refused
