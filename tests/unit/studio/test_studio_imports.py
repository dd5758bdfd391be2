"""The studio's device side imports the standard library and the rules, nothing else: what
import-linter's contract (pyproject.toml) cannot say for packages the project does not know."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

STUDIO = Path(__file__).resolve().parents[3] / "services" / "studio"
ALLOWED = ("services.shared.rules", "services.studio")


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
    }
    return names


def test_the_studio_imports_only_the_standard_library_and_the_rules() -> None:
    modules = sorted(STUDIO.glob("*.py"))
    assert modules, f"no module under {STUDIO}"
    stray = {
        f"{path.name}: {name}"
        for path in modules
        for name in imported(path)
        if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith(ALLOWED)
    }
    assert not stray, f"the studio imports beyond the standard library and the rules: {stray}"
