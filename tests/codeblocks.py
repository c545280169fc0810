"""The runnable code blocks of the README and of the docs, found the way their tests find them.

A page marks a block to run with an HTML comment (invisible once rendered) on the line before its
fence::

    <!-- test: quickstart -->
    ```python
    ...
    ```

:func:`code_block` returns the code of the block ``NAME``; :func:`run_block` executes it as a module
and returns its namespace, so that a test can call what the block defines with the sandbox's
address, a Redis prefix of its own or a temporary folder.  A block is never run with
``__name__ == "__main__"``, so its ``if __name__ == "__main__":`` part (the command a reader runs)
stays out of the test.

A Python block that is not a whole program (a few lines of a program shown whole elsewhere, a test
for a reader's own suite) says so, and why, on the line before its fence instead::

    <!-- fragment: the lines of the receiver above that replay a dead letter -->

:func:`python_blocks` lists every Python block of a page with that line, for the test that every
block is run or marked (``tests/docs/test_guide_blocks.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"^<!-- test: ([\w-]+) -->\n```python\n(.*?)^```$", re.M | re.S)
TEST = re.compile(r"<!-- test: ([\w-]+) -->")
FRAGMENT = re.compile(r"<!-- fragment: (.+) -->")


class Block(NamedTuple):
    """A Python block of a page: its first line's number, the line before its fence, its code."""

    line: int
    marker: str
    code: str


def python_blocks(page: Path) -> list[Block]:
    """Every ```` ```python ```` block of ``page``, marked or not, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if line == "```python":
            end = lines.index("```", number + 1)
            before = lines[number - 1] if number else ""
            blocks.append(Block(number + 1, before, "\n".join(lines[number + 1 : end]) + "\n"))
    return blocks


def code_blocks(page: Path) -> dict[str, str]:
    """Every marked block of ``page``, by name (a name used twice is an error)."""
    blocks: dict[str, str] = {}
    for name, code in MARKED.findall(page.read_text(encoding="utf-8")):
        assert name not in blocks, f"{page.name} marks two blocks as {name!r}"
        blocks[name] = code
    return blocks


def code_block(page: Path, name: str) -> str:
    """The code of the block marked ``<!-- test: NAME -->`` in ``page``."""
    blocks = code_blocks(page)
    assert name in blocks, f"{page.name} lost its block {name!r} (it has {sorted(blocks)})"
    return blocks[name]


def run_block(page: Path, name: str) -> dict[str, Any]:
    """Execute the block ``name`` of ``page`` as a module; returns what it defined."""
    namespace: dict[str, Any] = {"__name__": name.replace("-", "_")}
    code = compile(code_block(page, name), f"{page}:{name}", "exec")
    exec(code, namespace)  # noqa: S102 - the project's own documentation
    return namespace
