"""Fair cards: the shoe service shuffles and salts with the operating system's CSPRNG, and no
module that runs in production can seed (or even import) a predictable generator."""

from __future__ import annotations

import ast
import random
import secrets
from pathlib import Path

import pytest

from services.shared.rules import shoe as rules
from services.shoe.application import ShoeApplication
from services.shoe.domain import Shoe
from tests.signing_keys import shoe_env

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = ["contracts", "services/shared/rules", "services/shared/platform", "services/shoe"]
PRODUCTION += ["services/dealing", "services/settlement"]
"""Code that runs in the deployed services (tools such as the demo's simulated bettors may
use a seeded generator for their own choices, never for cards)."""


class CountingSystemRandom(random.SystemRandom):
    """The OS generator, counting what is asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.below = 0
        self.bytes = 0

    def _randbelow(self, n: int) -> int:  # type: ignore[override]
        self.below += 1
        return super()._randbelow(n)

    def randbytes(self, n: int) -> bytes:
        self.bytes += n
        return super().randbytes(n)


@pytest.fixture
def os_generator(monkeypatch: pytest.MonkeyPatch) -> CountingSystemRandom:
    """``secrets``' own SystemRandom, replaced by a counting one for the test."""
    counting = CountingSystemRandom()
    monkeypatch.setattr(secrets, "_sysrand", counting)
    return counting


@pytest.mark.parametrize("decks", [1, 6, 8])
def test_the_shoe_service_shuffles_and_salts_with_the_os_csprng(
    os_generator: CountingSystemRandom, decks: int
) -> None:
    shoes = ShoeApplication(env=shoe_env())
    shoes.shuffle_shoe("t1", "s1", decks, 16)
    # Fisher-Yates asks the generator once per card but the first; the salt is 32 bytes, and
    # the order and salt are encrypted at rest under a fresh 96-bit IV (A256GCM).
    assert os_generator.below == 52 * decks - 1
    assert os_generator.bytes == rules.SALT_BYTES + 12
    shoe = shoes.get_shoe("t1", "s1")
    assert shoe is not None and shoe.verify()


def test_the_default_generators_are_the_os_csprng() -> None:
    assert rules.shuffle.__defaults__ == (secrets.randbelow,)
    assert Shoe.shuffle.__kwdefaults__ is not None
    assert Shoe.shuffle.__kwdefaults__["randbelow"] is secrets.randbelow
    assert isinstance(secrets._sysrand, random.SystemRandom)  # type: ignore[attr-defined]


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_production_module_imports_a_predictable_generator() -> None:
    offenders = []
    files = [path for folder in PRODUCTION for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 40  # the folders above were found
    for path in files:
        found = _imports_of(path) & {"random", "numpy"}
        if found:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(found)}")
    assert offenders == []
