"""The ``asyncsdk`` command (also ``python -m asyncsdk``).

Subcommands: ``demo``, ``process``, ``tools``, ``widgets``, ``sandbox``, ``receiver``, ``inbox``.
Every error ends as one line on stderr (``error: ...``) and an exit code scripts can rely on
(see ``EPILOG``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from asyncsdk.cli import catalogue, demo, inbox, process, serve
from asyncsdk.cli._exits import EXIT_INTERRUPTED, exit_code_for

__all__ = ["build_parser", "main"]

EPILOG = """\
exit codes:
  0    everything asked for is done
  1    some processes failed or did not finish (the others are done; run again to resume)
  2    usage or configuration error (bad option, missing file, no API key, unknown widget)
  3    API, network or file error (the service refused or could not be reached)
  130  interrupted (Ctrl-C)

environment:
  ASYNCSDK_API_KEY    the API key (x-api-key header)
  ASYNCSDK_BASE_URL   the service address, e.g. https://api.example.com
  ASYNCSDK_APP_URL    the tool catalogue host, when it differs from the base URL

Try it offline first: asyncsdk demo
"""

SECRET_OPTIONS = frozenset({"--token"})  # options whose values are opaque secrets

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asyncsdk",
        description="Process real-estate photos with the image-processing service, or try it "
        "offline against the built-in sandbox.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from asyncsdk import __version__

    parser.add_argument("--version", action="version", version=f"asyncsdk {__version__}")
    parser.set_defaults(interrupt_hint="interrupted")  # a command may say how to resume
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo.add_parser(subparsers)
    process.add_parser(subparsers)
    catalogue.add_parsers(subparsers)
    serve.add_parsers(subparsers)
    inbox.add_parser(subparsers)
    for sub in subparsers.choices.values():
        sub.epilog = sub.epilog or EPILOG
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
    _show_defaults(parser)
    _own_usage(parser)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices.values()
    ]


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Write each option's default into its ``--help`` line, unless it has none (``None``,
    ``False``, empty) or its help already says it."""
    for action in parser._actions:
        help_text = action.help or ""
        default = action.default
        none = default is None or default is False or default is argparse.SUPPRESS
        if (
            action.option_strings
            and not none
            and default != []
            and help_text != argparse.SUPPRESS
            and "default" not in help_text
        ):
            action.help = f"{help_text} (default: %(default)s)".lstrip()
    for sub in _subcommands(parser):
        _show_defaults(sub)


def _own_usage(parser: argparse.ArgumentParser) -> None:
    """Let each subcommand be found after parsing, so that its own usage answers a stray
    argument (``process ... -w space bedroom``), not the top level's."""
    for sub in _subcommands(parser):
        sub.set_defaults(usage_parser=sub)
        _own_usage(sub)


def _error(message: str) -> None:
    text = " ".join(message.split()) or "unknown error"
    sys.stderr.write(f"error: {text}\n")
    sys.stderr.flush()


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its subcommands."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _option_strings(sub)
    return found


def _attach_secret_values(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """Write ``--token VALUE`` as ``--token=VALUE`` where VALUE begins with ``-``.

    Secrets are opaque: ``secrets.token_urlsafe()`` begins with ``-`` once in 64 tokens, and
    argparse would take such a value for an option and stop with "expected one argument".  A value
    that is itself one of our options is left alone, so a forgotten value still gets that message.
    """
    known = _option_strings(parser)
    out: list[str] = []
    args = list(argv)
    index = 0
    while index < len(args):
        arg = args[index]
        following = args[index + 1] if index + 1 < len(args) else None
        if (
            arg in SECRET_OPTIONS
            and following is not None
            and following.startswith("-")
            and following.split("=", 1)[0] not in known
        ):
            out.append(f"{arg}={following}")
            index += 2
            continue
        out.append(arg)
        index += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    try:
        parser = build_parser()
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    try:
        args, extra = parser.parse_known_args(
            _attach_secret_values(parser, sys.argv[1:] if argv is None else argv)
        )
        if extra:
            owner: argparse.ArgumentParser = vars(args).get("usage_parser", parser)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        _error(args.interrupt_hint)
        return EXIT_INTERRUPTED
    except Exception as exc:
        code = exit_code_for(exc)
        if code is None:
            raise
        _error(str(exc) or type(exc).__name__)
        return code
