"""Every Python block of the README and of the guides is run by a test as a whole program, or says
on the line before it that it is a fragment, and why (``tests/codeblocks.py``).

A block marked ``<!-- test: NAME -->`` must be named by some test beside its page's file name,
so that a block marked and then forgotten fails here; a fragment must at least be valid Python
(top-level ``await`` allowed, as in the lines of an async function it stands for).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from codeblocks import FRAGMENT, ROOT, TEST, python_blocks

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEST_SOURCES = {
    path: path.read_text(encoding="utf-8") for path in sorted((ROOT / "tests").rglob("test_*.py"))
}
#: A fragment's reason says what it is part of or where it runs: a few words at least.
SHORTEST_REASON = 4


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_python_block_is_run_or_marked_as_a_fragment_with_its_reason(page: Path) -> None:
    unmarked = []
    for block in python_blocks(page):
        test = TEST.fullmatch(block.marker)
        fragment = FRAGMENT.fullmatch(block.marker)
        where = f"{page_id(page)}:{block.line}"
        if test is not None:
            name = test.group(1)
            runners = [
                path.relative_to(ROOT).as_posix()
                for path, source in TEST_SOURCES.items()
                if f'"{name}"' in source and page.name in source
            ]
            assert runners, f"{where}: no test runs the block {name!r} of {page.name}"
        elif fragment is not None:
            reason = fragment.group(1)
            assert len(reason.split()) >= SHORTEST_REASON, f"{where}: say why it is a fragment"
            ast.parse(block.code, filename=where, feature_version=(3, 11))
            compile(block.code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        else:
            unmarked.append(where)
    assert unmarked == [], (
        "Python blocks neither run by a test (<!-- test: NAME -->) nor marked "
        f"<!-- fragment: why -->: {unmarked}"
    )


def test_the_guides_run_their_programs() -> None:
    """The guides' programs that a newcomer copies first stay whole programs run by a test."""
    for page, names in {
        "restarts.md": {"keyed-run", "key-reused", "resume"},
        "other-providers.md": {"github-headers"},
        "webhooks.md": {"receiver"},
        "migration.md": {"translate"},
    }.items():
        marked = {
            match.group(1)
            for block in python_blocks(ROOT / "docs" / page)
            if (match := TEST.fullmatch(block.marker))
        }
        assert names <= marked, f"{page}: {sorted(names - marked)} no longer run"
