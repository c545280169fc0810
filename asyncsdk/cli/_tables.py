"""Tables on the terminal: columns of cells, each written so that only printable text shows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["format_table", "printable"]


def printable(text: str) -> str:
    """``text`` with each unprintable character (the escape sequences a terminal obeys among
    them) written as its Python escape, so that what a sender put in an id only shows."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, with a rule under the header; every cell
    :func:`printable`."""
    text_rows = [[printable(str(cell)) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in text_rows)
    return "\n".join(out)
