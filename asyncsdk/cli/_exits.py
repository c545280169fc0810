"""How a command ends: its exit codes, the usage error, and SIGTERM taken as Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
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
