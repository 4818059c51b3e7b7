"""The documentation a user reads on their own: every command with an example, every page in the README's
table, and nothing that points outside the repository (a path a user does not have, an issue number)."""

from __future__ import annotations

import argparse
import re

import pytest
from conftest import ROOT

from segstore.cli import build_parser

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _commands() -> list[str]:
    """Every subcommand (and ``index`` subcommand) ``segstore --help`` lists."""
    names = []
    for action in build_parser()._actions:  # argparse has no public way to walk its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                names.append(name)
                for inner in sub._actions:
                    if isinstance(inner, argparse._SubParsersAction):
                        names += [f"{name} {child}" for child in inner.choices]
    return names


def _examples() -> str:
    text = (ROOT / "docs" / "cli.md").read_text()
    start = text.index("## Examples, command by command")
    return text[start:text.index("\n## ", start + 1)]


@pytest.mark.parametrize("command", _commands())
def test_every_command_of_help_has_an_example_in_cli_md(command):
    assert re.search(rf"^segstore {re.escape(command)}\b", _examples(), re.MULTILINE), command


def test_the_readmes_table_lists_every_page():
    readme = (ROOT / "README.md").read_text()
    for page in DOCS:
        assert f"[docs/{page.name}](docs/{page.name})" in readme, page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_points_outside_the_repository_or_at_an_issue(page):
    text = page.read_text()
    assert "../shared" not in text and "ANCHORS.md" not in text
    assert not re.search(r"\bissues? \d+", text, re.IGNORECASE), re.findall(r".*\bissues? \d+.*", text, re.I)
    for target, _anchor in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        assert (page.parent / target).resolve().exists(), f"{page.name}: {target}"
