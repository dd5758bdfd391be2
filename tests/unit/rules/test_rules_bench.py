"""The benchmarks file: each group rewrites only its own marked section."""

from __future__ import annotations

from pathlib import Path

from services.dev.cli.bench_cmd import INTRO, update_section


def test_a_section_is_created_then_replaced_in_place(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    update_section(path, "rules", "<!-- bench:rules:start -->\nold\n<!-- bench:rules:end -->\n")
    assert path.read_text().startswith(INTRO)
    update_section(path, "later", "<!-- bench:later:start -->\nL\n<!-- bench:later:end -->\n")
    update_section(path, "rules", "<!-- bench:rules:start -->\nnew\n<!-- bench:rules:end -->\n")
    text = path.read_text()
    assert "old" not in text
    assert text.count("bench:rules:start") == 1
    assert text.index("new") < text.index("\nL\n")  # the other group's section is kept, in place
