"""The shoe's secrets at rest in its SQLite files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from services.shared.platform.security.encryption import SCHEME, FieldDecryptionError
from services.shared.platform.security.keys import read_key_file
from services.shared.platform.settings import Settings
from services.shoe.application import ShoeApplication, ShoeKeyError
from services.shoe.domain import Shoe
from services.tools.admin.keys import init_secret_key, rotate_secret_key
from tests.unit.shoe.test_shoe_secrets_at_rest import key


def on_sqlite(path: Path, secret: str, **env: str) -> ShoeApplication:
    return ShoeApplication(
        env={
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(path),
            "PB_SHOE_SECRET_KEY": secret,
            "PB_SHOE_SECRET_KEY_FILE": "",
            **env,
        }
    )


def dealt(path: Path, secret: str, *shoes: str) -> dict[str, Shoe]:
    """Shoes of table t1 shuffled, burned and dealt from; not closed (still secret)."""
    app = on_sqlite(path, secret)
    found = {}
    for shoe_id in shoes:
        app.shuffle_shoe("t1", shoe_id, 1, 14)
        app.draw_cards("t1", shoe_id, "c1", f"{shoe_id}.r1", 4)
        shoe = app.get_shoe("t1", shoe_id)
        assert shoe is not None
        found[shoe_id] = shoe
    app.close()
    return found


SHUFFLED = Shoe.Shuffled.TOPIC


def tell_tales(shoe: Shoe) -> list[bytes]:
    """Byte strings that would give the order or salt away: the salt (hex and raw) and every
    run of three cards of the order still in the shoe, as JSON writes them."""
    runs = [json.dumps(shoe.order[i : i + 3])[1:-1] for i in range(shoe.next_position, 50)]
    return [shoe.salt.encode(), bytes.fromhex(shoe.salt), *(run.encode() for run in runs)]


def shuffled_state(path: Path, shoe: Shoe) -> dict[str, object]:
    with sqlite3.connect(path) as db:
        (state,) = db.execute(
            "SELECT state FROM stored_events WHERE topic = ? AND originator_id = ?",
            (SHUFFLED, shoe.id.hex),
        ).fetchone()
    found: dict[str, object] = json.loads(state)
    return found


def tamper(path: Path, shoe: Shoe, change: object) -> None:
    state = shuffled_state(path, shoe)
    change(state)  # type: ignore[operator]
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE stored_events SET state = ? WHERE topic = ? AND originator_id = ?",
            (json.dumps(state).encode(), SHUFFLED, shoe.id.hex),
        )


def test_the_sqlite_files_hold_neither_the_order_nor_the_salt(tmp_path: Path) -> None:
    path = tmp_path / "shoe.sqlite"
    shoe = dealt(path, key(), "s1")["s1"]
    files = [p for p in tmp_path.iterdir() if p.name.startswith("shoe.sqlite")]
    stored = b"".join(p.read_bytes() for p in files)  # the database, its -wal and -shm
    assert stored and shoe.commitment.encode() in stored
    assert [tale for tale in tell_tales(shoe) if tale in stored] == []
    state = shuffled_state(path, shoe)
    assert (state["order"], state["salt"], state["card_count"]) == (None, None, 52)
    envelope = state["encrypted"]
    assert isinstance(envelope, dict)
    assert (envelope["scheme"], envelope["kid"]) == (SCHEME, "shoe-secret-1")


def test_the_order_is_decrypted_to_deal_after_a_restart(tmp_path: Path) -> None:
    secret = key()
    shoe = dealt(tmp_path / "shoe.sqlite", secret, "s1")["s1"]
    again = on_sqlite(tmp_path / "shoe.sqlite", secret)
    assert again.check_secret_keys() == shoe.id
    assert again.draw_cards("t1", "s1", "c2", "r2", 3)
    replayed = again.get_shoe("t1", "s1")
    assert replayed is not None and replayed.order == shoe.order and replayed.verify()
    assert again.close_shoe("t1", "s1")  # the reveal is plain text, as published
    closed = again.events.get(shoe.id, gt=replayed.version)
    assert [type(event).__name__ for event in closed] == ["Closed"]


def test_a_wrong_key_refuses_to_start(tmp_path: Path) -> None:
    dealt(tmp_path / "shoe.sqlite", key(), "s1")
    with pytest.raises(ShoeKeyError, match="does not decrypt with key shoe-secret-1"):
        on_sqlite(tmp_path / "shoe.sqlite", key())  # another key under the same id


def test_a_tampered_ciphertext_of_the_newest_shoe_refuses_to_start(tmp_path: Path) -> None:
    secret = key()
    shoe = dealt(tmp_path / "shoe.sqlite", secret, "s1")["s1"]

    def flip(state: dict[str, dict[str, str]]) -> None:
        head, empty, iv, ciphertext, tag = state["encrypted"]["jwe"].split(".")
        ciphertext = ("B" if ciphertext[0] == "A" else "A") + ciphertext[1:]
        state["encrypted"]["jwe"] = ".".join((head, empty, iv, ciphertext, tag))

    tamper(tmp_path / "shoe.sqlite", shoe, flip)
    with pytest.raises(ShoeKeyError, match="altered"):
        on_sqlite(tmp_path / "shoe.sqlite", secret)


def test_an_older_shoe_that_does_not_decrypt_is_never_dealt_from(tmp_path: Path) -> None:
    secret = key()
    shoes = dealt(tmp_path / "shoe.sqlite", secret, "s1", "s2")

    def moved(state: dict[str, object]) -> None:  # s2's ciphertext in s1's row
        state["encrypted"] = shuffled_state(tmp_path / "shoe.sqlite", shoes["s2"])["encrypted"]

    tamper(tmp_path / "shoe.sqlite", shoes["s1"], moved)
    app = on_sqlite(tmp_path / "shoe.sqlite", secret)  # the newest shoe (s2) opens
    with pytest.raises(FieldDecryptionError, match="belongs elsewhere"):
        app.draw_cards("t1", "s1", "c2", "r2", 3)
    assert app.draw_cards("t1", "s2", "c2", "r2", 3)


def test_plain_values_beside_a_ciphertext_are_refused(tmp_path: Path) -> None:
    secret = key()
    shoe = dealt(tmp_path / "shoe.sqlite", secret, "s1")["s1"]
    tamper(tmp_path / "shoe.sqlite", shoe, lambda state: state.update(salt="00" * 32))
    with pytest.raises(ShoeKeyError, match="plain text too"):
        on_sqlite(tmp_path / "shoe.sqlite", secret)


def test_a_rotated_key_set_opens_the_shoes_of_each_key_id(tmp_path: Path) -> None:
    settings = Settings(service="shoe", data_dir=tmp_path)
    assert "created" in init_secret_key(settings)
    assert "kept" in init_secret_key(settings)  # idempotent
    file_env = {"PB_SHOE_SECRET_KEY": "", "PB_SHOE_SECRET_KEY_FILE": ""}
    env = {**file_env, **settings.secret_key_env()}
    path = tmp_path / "shoe.sqlite"
    first = on_sqlite(path, "", **env)
    first.shuffle_shoe("t1", "s1", 1, 14)
    first.close()
    assert rotate_secret_key(settings) == "shoe-secret-2"
    assert read_key_file(settings.shoe_secret_key_path).kids == ("shoe-secret-2", "shoe-secret-1")
    second = on_sqlite(path, "", **env)
    second.shuffle_shoe("t1", "s2", 1, 14)
    kids = {
        shoe_id: shuffled_state(path, shoe)["encrypted"]["kid"]  # type: ignore[index]
        for shoe_id in ("s1", "s2")
        if (shoe := second.get_shoe("t1", shoe_id)) is not None and shoe.verify()
    }
    assert kids == {"s1": "shoe-secret-1", "s2": "shoe-secret-2"}
