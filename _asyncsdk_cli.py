"""The ``asyncsdk`` command's entry point: imports the command line, then runs it.

It lives outside the ``asyncsdk`` package, whose import (the client, aiohttp) takes a good part of
a second: a Ctrl-C in that time ends the command as one during it does, with ``interrupted`` on
stderr and exit code 130, not a traceback.  Nothing else belongs here.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

EXIT_INTERRUPTED = 130  # as asyncsdk.cli's, which cannot be imported before the import it guards


def main() -> int:
    """Import :mod:`asyncsdk.cli` and run :func:`asyncsdk.cli.main` on ``sys.argv``."""
    try:
        from asyncsdk.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return EXIT_INTERRUPTED
    return run()


if __name__ == "__main__":
    raise SystemExit(main())
