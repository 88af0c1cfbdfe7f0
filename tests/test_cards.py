"""The method cards follow CONTRIBUTING.md's template: the same sections in the same order, near
150 lines, code that parses, functional names that resolve, links that lead somewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import lightning_info.functional as F

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "lightning_info" / "methods"
CARDS = sorted(METHODS.glob("*/README.md"))
MAX_CARD_LINES = 180

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


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_card_length(card: Path):
    lines = card.read_text().count("\n")
    assert lines <= MAX_CARD_LINES, (
        f"{card} has {lines} lines; keep it near 150 and move investigations to NOTES.md"
    )


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
