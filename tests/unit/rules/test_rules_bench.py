"""The benchmarks file: each group rewrites only its own marked section."""

from __future__ import annotations

from pathlib import Path

from services.dev.cli.bench_cmd import GROUPS, INTRO, Measurement, section_text, update_section


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


def test_a_section_names_the_command_machine_and_targets() -> None:
    results = [
        Measurement("Exact odds, full shoe, 8 decks", 12.5, "ms", limit=1000, runs=9),
        Measurement("Coups resolved per second", 90_000, "coups/s", higher_is_better=True),
    ]
    text = section_text(GROUPS["rules"], results, "punto-banco bench --only rules --write")
    assert text.startswith("<!-- bench:rules:start -->")
    assert text.endswith("<!-- bench:rules:end -->\n")
    assert "punto-banco bench --only rules --write" in text
    assert "cores" in text
    assert "< 1,000 ms (met)" in text
    assert "12.5 ms" in text
    assert "90,000 coups/s" in text
