"""A one-line progress bar on a terminal, redrawn in place with ``\\r``; silent elsewhere.

::

    with Progress(total=12, label="processing") as bar:
        ...
        bar.advance()           # one item finished
        bar.note("kitchen.jpg failed")   # a line printed above the bar

The bar is drawn only when its stream is a terminal (or ``enabled=True``), so logs, pipes and CI
output stay clean.  Redraws are throttled to ``min_interval`` seconds, except the final one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Self, TextIO

__all__ = ["Progress", "render_bar"]


def render_bar(done: int, total: int, *, width: int = 28, label: str = "", suffix: str = "") -> str:
    """The text of the bar: ``label [#######.......] 3/7 suffix`` (pure; no I/O)."""
    total = max(total, 0)
    done = min(max(done, 0), total) if total else max(done, 0)
    filled = round(width * done / total) if total else width
    bar = "#" * filled + "." * (width - filled)
    parts = [label, f"[{bar}]", f"{done}/{total}", suffix]
    return " ".join(part for part in parts if part)


def _is_terminal(stream: TextIO | None) -> bool:
    """Whether a bar can be drawn on ``stream``.

    ``sys.stderr`` is ``None`` under pythonw and in some daemons, and a stand-in installed with
    ``contextlib.redirect_stderr`` may offer only ``write``: no bar on either.
    """
    if stream is None:
        return False
    try:
        isatty = stream.isatty
    except AttributeError:  # a stand-in without isatty
        return False
    try:
        return callable(isatty) and bool(isatty())
    except (ValueError, OSError):  # ValueError: the stream is closed
        return False


class Progress:
    """A single-line progress bar for ``total`` items on ``stream`` (default ``sys.stderr``).

    ``enabled``: ``None`` (default) draws only when the stream is a terminal.  ``clock`` is the
    time source in seconds (elapsed time and redraw throttling).
    """

    def __init__(
        self,
        total: int,
        *,
        label: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        width: int = 28,
        min_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.done = 0
        self.label = label
        self.status = ""
        self._stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = _is_terminal(self._stream)
        self.enabled = enabled
        self._width = width
        self._min_interval = min_interval
        self._clock = clock
        self._started = clock()
        self._last_draw = float("-inf")
        self._last_len = 0
        self._closed = False

    @property
    def elapsed(self) -> float:
        return self._clock() - self._started

    def advance(self, count: int = 1) -> None:
        """Count ``count`` more items as finished and redraw."""
        self.done += count
        self.refresh(force=self.done >= self.total)

    def set_status(self, text: str) -> None:
        """Short text shown after the counts (``2 waiting``)."""
        self.status = text
        self.refresh()

    def note(self, line: str) -> None:
        """Print ``line`` above the bar (the bar is redrawn below it); nothing when disabled."""
        if not self.enabled or self._closed:
            return
        self._clear()
        self._stream.write(line + "\n")
        self._last_draw = float("-inf")
        self.refresh(force=True)

    def text(self) -> str:
        suffix = f"{self.elapsed:5.1f}s"
        if self.status:
            suffix = f"{suffix}  {self.status}"
        return render_bar(self.done, self.total, width=self._width, label=self.label, suffix=suffix)

    def refresh(self, *, force: bool = False) -> None:
        """Redraw, at most once per ``min_interval`` unless ``force``."""
        if not self.enabled or self._closed:
            return
        now = self._clock()
        if not force and now - self._last_draw < self._min_interval:
            return
        self._last_draw = now
        line = self.text()
        padding = " " * max(0, self._last_len - len(line))
        self._stream.write("\r" + line + padding)
        self._stream.flush()
        self._last_len = len(line)

    def _clear(self) -> None:
        if self._last_len:
            self._stream.write("\r" + " " * self._last_len + "\r")
            self._last_len = 0

    def close(self) -> None:
        """Draw the last state and end the line.  Safe to call twice."""
        if self._closed:
            return
        if self.enabled:
            self.refresh(force=True)
            self._stream.write("\n")
            self._stream.flush()
        self._closed = True

    @contextlib.asynccontextmanager
    async def ticking(self, interval: float = 0.25) -> AsyncIterator[Self]:
        """Redraw every ``interval`` seconds while the block runs (the elapsed time moves)."""
        if not self.enabled:
            yield self
            return

        async def tick() -> None:
            while True:
                await asyncio.sleep(interval)
                self.refresh(force=True)

        task = asyncio.create_task(tick())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def __enter__(self) -> Self:
        self.refresh(force=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
