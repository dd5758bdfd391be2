"""docs/architecture.md: every file it names exists, and its diagram draws a bet's path."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
RUNTIME = ROOT / "services" / "shared" / "platform"


def named_paths() -> set[str]:
    """Every ``something.py`` (or ``.md``, ``.toml``) path the page names."""
    return set(re.findall(r"[\w./-]+\.(?:py|md|toml)\b", PAGE))


def test_every_file_the_page_names_exists() -> None:
    missing = []
    for name in sorted(named_paths()):
        places = (
            ROOT,
            ROOT / "docs",
            RUNTIME,
            *(ROOT / "services" / s for s in ("settlement", "gateway")),
        )
        candidates = [place / name for place in places]
        if not any(path.is_file() for path in candidates):
            missing.append(name)
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_the_diagram_draws_a_bet_in_and_its_answer_out_through_named_files() -> None:
    [diagram] = re.findall(r"```mermaid\n(.*?)```", PAGE, re.DOTALL)
    assert "bet-commands" in diagram and "bet-events" in diagram
    files = re.findall(r"services/[\w/]+\.py", diagram)
    assert len(files) >= 8 and all((ROOT / name).is_file() for name in files)


def test_every_part_of_the_runtime_is_in_the_page() -> None:
    parts = [path.name for path in RUNTIME.iterdir() if (path / "__init__.py").is_file()]
    assert sorted(parts) == ["cells", "consumer", "host", "relay", "security", "store"]
    assert all(f"`{part}/`" in PAGE for part in parts)
