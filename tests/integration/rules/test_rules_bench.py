"""The rules bench's section, naming the machine it ran on."""

from __future__ import annotations

from services.dev.cli.bench_cmd import GROUPS, Measurement, section_text


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
