"""The progress bar: drawn in place on a terminal, silent anywhere else."""

from __future__ import annotations

import asyncio
import io

from asyncsdk.cli._progress import Progress, render_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_render_bar() -> None:
    assert render_bar(0, 4, width=8, label="go") == "go [........] 0/4"
    assert render_bar(2, 4, width=8) == "[####....] 2/4"
    assert render_bar(9, 4, width=8, suffix="1.0s") == "[########] 4/4 1.0s"
    assert render_bar(0, 0, width=4) == "[####] 0/0"


def test_quiet_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(total=3, stream=stream) as bar:
        bar.advance()
        bar.note("something failed")
        bar.advance(2)
    assert stream.getvalue() == ""


def test_redraws_one_line_on_a_terminal() -> None:
    now = [0.0]
    stream = Terminal()
    with Progress(total=3, label="staging", stream=stream, clock=lambda: now[0]) as bar:
        now[0] = 1.0
        bar.advance()
        now[0] = 2.0
        bar.note("kitchen.jpg: failed")
        now[0] = 3.0
        bar.advance(2)
    text = stream.getvalue()
    assert text.endswith("staging [############################] 3/3   3.0s\n")
    assert "\r" in text
    assert text.count("\n") == 2  # the note and the final line; the bar itself redraws in place
    assert "kitchen.jpg: failed\n" in text


def test_redraws_are_throttled() -> None:
    now = [0.0]
    stream = Terminal()
    bar = Progress(total=100, stream=stream, clock=lambda: now[0], min_interval=1.0)
    bar.refresh(force=True)
    for _ in range(10):
        bar.advance()  # within the same second: not drawn
    assert stream.getvalue().count("\r") == 1
    now[0] = 1.5
    bar.advance()
    assert stream.getvalue().count("\r") == 2
    bar.close()


async def test_ticking_redraws_while_waiting() -> None:
    stream = Terminal()
    with Progress(total=1, stream=stream) as bar:
        async with bar.ticking(interval=0.01):
            for _ in range(100):
                if stream.getvalue().count("\r") >= 3:
                    break
                await asyncio.sleep(0.01)
    assert stream.getvalue().count("\r") >= 3
