"""The docs stay true to the tree: the paths and links they name exist, the README maps every
page and folder, the command table is the parser's, and docs/architecture.md draws a bet's path.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from services.tools.cli.main import commands_table

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
RUNTIME = ROOT / "services" / "shared" / "platform"
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "BENCHMARKS.md",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("deploy/**/*.md"),
    ]
)
DOC_PAGES = sorted(path.name for path in (ROOT / "docs").glob("*.md"))


def ignored(path: str) -> bool:
    """Whether git ignores ``path`` (a file an operator makes, like `deploy/.env`): a pattern of
    a .gitignore on its way matches its next part (simple patterns, as this tree's are)."""
    parts = path.split("/")
    for depth in range(len(parts)):
        rules = ROOT.joinpath(*parts[:depth]) / ".gitignore"
        if rules.is_file():
            for line in rules.read_text(encoding="utf-8").splitlines():
                pattern = line.strip().rstrip("/")
                if pattern and not pattern.startswith("#"):
                    part = parts[depth]
                    if fnmatch.fnmatch(part, pattern) or fnmatch.fnmatch(pattern, part):
                        return True
    return False


def top_level_folders() -> set[str]:
    """The repository's top-level folders: neither hidden nor ignored (var/, *.egg-info/...)."""
    return {
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and not path.name.startswith(".") and not ignored(path.name)
    }


def section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]


def named_paths() -> set[str]:
    """Every ``something.py`` (or ``.md``, ``.toml``) path the page names."""
    return set(re.findall(r"[\w./-]+\.(?:py|md|toml)\b", PAGE))


def test_every_file_the_page_names_exists() -> None:
    missing = []
    for name in sorted(named_paths()):
        services = ROOT / "services"
        places = (ROOT, ROOT / "docs", RUNTIME, services / "settlement", services / "gateway")
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


def test_the_operations_page_command_table_is_the_one_the_parser_declares() -> None:
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    commands = section(page, "Commands")
    table = commands[commands.index("| command |") :].split("\n\n", 1)[0].strip() + "\n"
    assert table == commands_table(), (
        "docs/operations.md's command table differs from the commands' parser: paste the output "
        "of `.venv/bin/python -c 'from services.tools.cli.main import commands_table; "
        "print(commands_table())'`"
    )


def test_every_path_a_page_names_from_the_root_exists() -> None:
    """A path that starts at a top-level folder (`services/...`, `deploy/k8s/`, `docs/x.md`) is
    in the tree or ignored by git; one with a placeholder (`<service>`, `{name}`, `$r`) is
    checked up to it."""
    tops = "|".join(sorted(top_level_folders()))
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for found, placeholder in re.findall(
            rf"(?<![\w./<{{-])((?:{tops})/[\w.*/-]*)([<{{$]?)", text
        ):
            path = found + "*" if placeholder else found.rstrip(".-/")
            if not list(ROOT.glob(path)) and not ignored(path):
                missing.append(f"{page.relative_to(ROOT)}: {found}")
    assert not missing, f"paths named in the docs that do not exist: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_every_link_between_the_pages_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (
                anchor and linked.suffix == ".md" and anchor not in anchors(linked)
            ):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, f"links that lead nowhere: {broken}"


def test_the_readme_map_links_every_page_and_its_layout_names_every_folder() -> None:
    docs_map = section(README, "The docs, in reading order")
    unlinked = [name for name in DOC_PAGES if f"](docs/{name})" not in docs_map]
    assert "](BENCHMARKS.md)" in docs_map and not unlinked, f"not in the README's map: {unlinked}"
    [layout] = re.findall(r"```\n(.*?)```", section(README, "Layout"), re.DOTALL)
    unnamed = [
        f"{name}/" for name in top_level_folders() if not re.search(rf"^{name}/", layout, re.M)
    ]
    unnamed += [name for name in DOC_PAGES if name not in layout]
    assert not unnamed, f"not in the README's layout: {unnamed}"


def test_no_page_says_how_many_tests_there_are() -> None:
    """A count of tests is out of date with the next test: say what they check instead."""
    counts = [
        f"{page.relative_to(ROOT)}: {found}"
        for page in PAGES
        for found in re.findall(
            r"\b\d[\d,]* (?:unit |integration |e2e )?tests\b", page.read_text(encoding="utf-8")
        )
    ]
    assert not counts, f"hard-coded counts of tests: {counts}"
