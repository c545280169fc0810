"""What the subcommands share: exit codes, option parsing and tables."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

from asyncsdk import (
    APIError,
    AsyncSDKError,
    ConfigurationError,
    ProcessFailedError,
    WaitTimeoutError,
)

__all__ = [
    "EXIT_API",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "exit_code_for",
    "format_table",
    "parse_widgets",
    "printable",
    "service_settings",
    "sigterm_as_interrupt",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_API: Final = 3
EXIT_INTERRUPTED: Final = 130


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM stops the command as Ctrl-C does: the running task is cancelled
    (its cleanup runs: a partial download is removed, the journal stays whole), and the block
    ends with ``KeyboardInterrupt`` (exit 130, one ``error: interrupted`` line)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
        yield
        return
    try:
        yield
    except asyncio.CancelledError:
        if terminated:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


class UsageError(ConfigurationError):
    """The command line asks for something impossible (a missing file, a bad option value)."""


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code of an error that ends a command; ``None`` for errors that are defects."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, APIError | OSError):
        return EXIT_API
    if isinstance(exc, ProcessFailedError | WaitTimeoutError):
        return EXIT_FAILED
    if isinstance(exc, AsyncSDKError):
        return EXIT_USAGE
    return None


def service_settings(
    environ: Mapping[str, str], base_url: str | None, app_url: str | None
) -> tuple[str, str, str | None]:
    """The API key, base URL and catalogue URL from the options and the environment."""
    key = environ.get("ASYNCSDK_API_KEY", "").strip()
    if not key:
        raise UsageError(
            "no API key: set ASYNCSDK_API_KEY (and ASYNCSDK_BASE_URL), or add --sandbox to try "
            "against the built-in emulator"
        )
    base = base_url or environ.get("ASYNCSDK_BASE_URL", "").strip()
    if not base:
        raise UsageError(
            "no service address: set ASYNCSDK_BASE_URL or pass --base-url, or add --sandbox"
        )
    app = app_url or environ.get("ASYNCSDK_APP_URL", "").strip() or None
    return key, base, app


def parse_widgets(options: Sequence[str]) -> dict[str, str | list[str]]:
    """``["space=bedroom", "options=a", "options=b"]`` -> ``{"space": "bedroom", "options":
    ["a", "b"]}``: a name given twice becomes a list (multi-select widgets)."""
    widgets: dict[str, str | list[str]] = {}
    for option in options:
        name, sep, value = option.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise UsageError(
                f"--widget takes NAME=VALUE, e.g. --widget space=bedroom, not {option!r}"
            )
        values = [v.strip() for v in value.split(",") if v.strip()]
        previous = widgets.get(name)
        if previous is None:
            widgets[name] = values[0] if len(values) == 1 else values
        else:
            widgets[name] = [*([previous] if isinstance(previous, str) else previous), *values]
    return widgets


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
