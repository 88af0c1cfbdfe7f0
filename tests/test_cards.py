"""The method cards follow CONTRIBUTING.md's template: the same sections in the same order, each
with something in it; a short claim; results as a table of mean ± std over named seeds; no
investigation inside a card (it lives with the study, in ``recipes/lab/<name>/NOTES.md``); code
that parses, functional names that resolve, links that lead somewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import lightning_info.functional as F

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "lightning_info" / "methods"
CARDS = sorted(METHODS.glob("*/README.md"))

MAX_CLAIM_LINES = 25
"""The Claim says what the paper claims in a few paragraphs (today's cards: 5 to 12 lines)."""

MAX_SECTION_TEXT_LINES = 45
"""Lines of running text (outside code blocks and tables) in one ``##`` section. A card section
says what a user needs in a few paragraphs; an investigation runs longer (the long sections of
the notes hold up to 176 such lines). Today's longest card section holds 28, so a paragraph or
two can still join one; a section that needs more is an investigation and moves to the notes."""

MAX_SECTION_LINES = 130
"""All lines of one ``##`` section, code and tables included. Usage code and a results table
belong in a card; per-seed tables and full test lists belong in the notes. Today's longest card
section (How to use it, mostly code) has 97 lines."""

EXACT_RESULTS = {
    "train_test_overlap": "a deterministic scan of one planted corpus: counts, exact on seed 0",
}
"""Cards whose results carry no spread, and why: their numbers do not vary over seeds."""

SECTIONS = (
    "## Claim",
    "## How to use it",
    "### Attach it",
    "### From the command line",
    "### Functional",
    "## Results",
    "## Differences from the paper and its code",
    "## Tests",
    "## Not done",
)
"""Every card's headings of these levels, in this order (further ``###`` headings may sit inside
a section; no other ``##`` heading)."""


def _headings(text: str) -> list[str]:
    inside_code = False
    found = []
    for line in text.splitlines():
        if line.startswith("```"):
            inside_code = not inside_code
        elif not inside_code and line.startswith("#"):
            found.append(line.rstrip())
    return found


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def test_every_method_has_a_card():
    folders = sorted(p.parent.name for p in METHODS.glob("*/functional.py"))
    assert [c.parent.name for c in CARDS] == folders
    assert len(CARDS) == 19


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_card_sections_in_template_order(card: Path):
    headings = _headings(card.read_text())
    assert headings[0].startswith("# "), "a card opens with its title"
    template = [h for h in headings if h.split(" ", 1)[0] == "##" or h in SECTIONS]
    assert template == list(SECTIONS), f"{card}: sections {template}"


def _sections(text: str, level: str = "##") -> dict[str, list[str]]:
    """The lines under each heading of ``level`` (``"##"``: with its ``###`` subsections;
    ``"###"``: up to the next heading of any level), headings inside code blocks ignored."""
    sections: dict[str, list[str]] = {}
    current = None
    inside_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside_code = not inside_code
        elif not inside_code and line.startswith("#"):
            depth = line.split(" ", 1)[0]
            if depth == level:
                current = line.rstrip()
                sections[current] = []
                continue
            if level == "###" or len(depth) <= len(level):
                current = None
        if current is not None:
            sections[current].append(line)
    return sections


def _running_text(lines: list[str]) -> list[str]:
    """The non-blank lines outside code blocks and tables."""
    text, inside_code = [], False
    for line in lines:
        if line.startswith("```"):
            inside_code = not inside_code
        elif not inside_code and line.strip() and not line.startswith(("|", "#")):
            text.append(line)
    return text


def _tables(lines: list[str]) -> list[list[str]]:
    """The Markdown tables among ``lines``: a header row, a ``|---|`` row and the body rows."""
    tables, current = [], []
    for line in [*lines, ""]:
        if line.startswith("|"):
            current.append(line)
            continue
        if len(current) >= 3 and re.fullmatch(r"\|[\s:|-]*-[\s:|-]*\|?", current[1].strip()):
            tables.append(current)
        current = []
    return tables


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_every_section_of_a_card_says_something(card: Path):
    text = card.read_text()
    for level in ("##", "###"):
        for heading, lines in _sections(text, level).items():
            assert any(line.strip() for line in lines), f"{card}: {heading} is empty"


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_the_claim_is_short(card: Path):
    claim = _sections(card.read_text())["## Claim"]
    while claim and not claim[-1].strip():
        claim.pop()
    assert len(claim) <= MAX_CLAIM_LINES, (
        f"{card}: the Claim has {len(claim)} lines; say it in a few paragraphs "
        f"(at most {MAX_CLAIM_LINES} lines) and move the discussion to the notes"
    )


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_results_are_a_table_of_mean_and_std_over_named_seeds(card: Path):
    results = _sections(card.read_text())["## Results"]
    tables = _tables(results)
    assert tables, f"{card}: the Results section holds no Markdown table"
    rows = [row for table in tables for row in table[2:]]
    exact = EXACT_RESULTS.get(card.parent.name)
    if exact is None:
        assert any("±" in row for row in rows), (
            f"{card}: no Results table gives a mean ± std; report the spread over seeds"
        )
    else:
        assert not any("±" in row for row in rows), f"{card}: drop it from EXACT_RESULTS"
        assert re.search(r"\bexact\b", " ".join(results)), f"{card}: say the counts are exact"
    seeds = re.compile(r"\bseeds?\s+\d|\b(\d+|three|five|ten)\s+(\w+\s+)?seeds\b", re.I)
    assert seeds.search(" ".join(results)), f"{card}: the Results section does not name its seeds"


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_no_card_section_holds_an_investigation(card: Path):
    for heading, lines in _sections(card.read_text()).items():
        text = _running_text(lines)
        assert len(text) <= MAX_SECTION_TEXT_LINES, (
            f"{card}: {heading} has {len(text)} lines of text (at most "
            f"{MAX_SECTION_TEXT_LINES}); move the investigation to recipes/lab/<name>/NOTES.md "
            "and link it"
        )
        assert len(lines) <= MAX_SECTION_LINES, (
            f"{card}: {heading} has {len(lines)} lines (at most {MAX_SECTION_LINES}); move "
            "per-seed tables and full lists to recipes/lab/<name>/NOTES.md"
        )


def test_the_card_checks_catch_the_card_they_guard_against(tmp_path):
    """Each check passes on a real card and fails on a copy broken the way it guards against."""
    text = (METHODS / "fisher_sft" / "README.md").read_text()
    results = "\n".join(_sections(text)["## Results"])
    broken = [
        (test_the_claim_is_short, text.replace("## Claim\n", "## Claim\n" + "claimed.\n" * 26)),
        (
            test_every_section_of_a_card_says_something,
            text.split("## Not done")[0] + "## Not done\n",
        ),
        (
            test_every_section_of_a_card_says_something,
            re.sub(
                r"(### From the command line\n).*?(?=### Functional)", r"\1\n", text, flags=re.S
            ),
        ),
        (test_results_are_a_table_of_mean_and_std_over_named_seeds, text.replace("±", "+-")),
        (
            test_results_are_a_table_of_mean_and_std_over_named_seeds,
            text.replace(results, "\nHeld-out NLL 5.64 ± 0.01 over seeds 0, 1, 2.\n\n"),
        ),
        (
            test_results_are_a_table_of_mean_and_std_over_named_seeds,
            re.sub(r"\bseeds?\b", "runs", text),
        ),
        (
            test_no_card_section_holds_an_investigation,
            text.replace("## Not done\n", "## Not done\n" + "what we then tried.\n" * 46),
        ),
        (
            test_no_card_section_holds_an_investigation,
            text.replace("## Tests\n", "## Tests\n| a | b |\n|---|---|\n" + "| 1 | ± |\n" * 130),
        ),
    ]
    card = tmp_path / "fisher_sft" / "README.md"
    card.parent.mkdir()
    card.write_text(text)
    for check, _ in broken:
        check(card)
    for check, mutated in broken:
        card.write_text(mutated)
        with pytest.raises(AssertionError):
            check(card)


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_card_python_parses_and_functional_names_resolve(card: Path):
    text = card.read_text()
    blocks = _code_blocks(text, "python")
    assert blocks, f"{card} shows no Python"
    for block in blocks:
        ast.parse(block)
    functional = text.split("### Functional", 1)[1].split("\n## ", 1)[0]
    used = re.findall(r"\bF\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?", functional)
    assert used, f"{card}: the Functional section calls nothing through lightning_info.functional"
    for name, attribute in used:
        target = getattr(F, name)  # AttributeError names an unknown function
        if attribute and name in F.CORES:
            getattr(target, attribute)


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_card_links_resolve(card: Path):
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", card.read_text()):
        assert (card.parent / target).resolve().exists(), f"{card}: broken link {target}"


def test_readme_method_table_gives_each_card_its_evidence():
    """The README's method table names, per method, shown / partly / not shown, a number with
    its spread, and a link to the card's Results."""
    text = (ROOT / "README.md").read_text()
    table = next(b for b in text.split("\n\n") if b.startswith("| paper (ICML 2025)"))
    rows = table.splitlines()[2:]
    linked = set()
    for row in rows:
        evidence = row.rstrip(" |").rsplit(" | ", 1)[1]
        assert re.match(r"\*\*(shown|partly|not shown)\*\*", evidence), evidence
        assert "±" in evidence or re.search(r"\d+ of \d+", evidence), evidence
        card = re.search(r"\(lightning_info/methods/(\w+)/README\.md#results\)", evidence)
        assert card, f"no link to a card's Results: {evidence}"
        linked.add(card.group(1))
    assert linked == {c.parent.name for c in CARDS}
