"""``python -m asyncsdk.sandbox``: serve the emulator until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp

from asyncsdk import ConfigurationError
from asyncsdk.sandbox._config import SandboxConfig, check_webhook_url
from asyncsdk.sandbox._masking import mask_url

__all__ = [
    "build_parser",
    "config_from_args",
    "console_log",
    "main",
    "run_resend",
    "start_failure",
    "webhook_url",
]


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The sandbox's command-line options (a CLI may pass its own sub-parser to fill)."""
    p = parser or argparse.ArgumentParser(prog="python -m asyncsdk.sandbox", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=port_number,
        default=8080,
        help="port to bind (default 8080); 0 picks a free one",
    )
    p.add_argument(
        "--port-file",
        type=Path,
        metavar="PATH",
        help="once serving, write the bound port to PATH (removed at exit); use with --port 0",
    )
    p.add_argument(
        "--pending-delay",
        type=float,
        default=1.0,
        help="seconds a process is pending (default: %(default)s)",
    )
    p.add_argument(
        "--processing-delay",
        type=float,
        default=3.0,
        help="seconds it is processing (default: %(default)s)",
    )
    p.add_argument(
        "--failure-rate",
        type=float,
        default=0.0,
        help="share of processes that fail (default: %(default)s)",
    )
    p.add_argument(
        "--webhook",
        action="append",
        default=[],
        type=webhook_url,
        metavar="URL",
        help="deliver process.completed to URL, http:// or https:// (repeatable); each failed "
        "attempt is told on stderr, every delivery shown at /_sandbox/",
    )
    p.add_argument(
        "--webhook-retries",
        type=int,
        default=9,
        metavar="N",
        help="attempts of each webhook delivery before it is given up (default: %(default)s): "
        "with the default base, retries over about two minutes, so a receiver started late "
        "still gets its events",
    )
    p.add_argument(
        "--webhook-retry-base",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="seconds before the first webhook retry; each next wait doubles "
        "(default: %(default)s): 0.5, 1, 2 ... 64 s",
    )
    p.add_argument("--enveloped", action="store_true", help='answer {"data": ..., "message": "ok"}')
    p.add_argument(
        "--rate-limit", action="store_true", help="10 generations per 10 minutes per key"
    )
    p.add_argument(
        "--poll-limit", action="store_true", help="429 for a process GET within 5 s of the last"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of every random choice; with it ids repeat run after run (default: fresh ids "
        "each run, other choices as with seed 0)",
    )
    p.add_argument(
        "--control-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name under which the /_sandbox/ routes answer too (repeatable); they "
        "always answer localhost and IP addresses",
    )
    return p


def config_from_args(args: argparse.Namespace) -> SandboxConfig:
    return SandboxConfig(
        pending_delay=args.pending_delay,
        processing_delay=args.processing_delay,
        failure_rate=args.failure_rate,
        webhook_urls=tuple(args.webhook),
        webhook_max_attempts=args.webhook_retries,
        webhook_retry_base=args.webhook_retry_base,
        enveloped=args.enveloped,
        rate_limit=args.rate_limit,
        poll_limit=args.poll_limit,
        seed=args.seed,
        control_hosts=frozenset(args.control_host),
    )


def webhook_url(text: str) -> str:
    """``--webhook``: a URL the sandbox can deliver to (scheme, host and port checked)."""
    try:
        return check_webhook_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port_number(text: str) -> int:
    """``--port``: 0 to 65535 (0 picks a free port)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0 picks a free one), not {text!r}")
    return port


def start_failure(exc: OSError, args: argparse.Namespace) -> str:
    """What to tell the user whose sandbox did not start: the address it could not bind, or the
    ``--port-file`` it could not write."""
    if exc.filename is not None:
        return (
            f"cannot write the --port-file {args.port_file}: {exc.strerror or exc}; name a file "
            "in a folder that exists"
        )
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {args.port} on {args.host} is in use (another sandbox, or the app it "
            "serves?); pass --port N for another, or --port 0 for a free one"
        )
    return (
        f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}; check --host and --port"
    )


@contextlib.contextmanager
def console_log() -> Iterator[None]:
    """Tell the sandbox's warnings (each failed webhook delivery attempt) on stderr, one line
    each behind the UTC time, while the block runs."""
    logger = logging.getLogger("asyncsdk.sandbox")
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter("%(asctime)s UTC %(message)s", datefmt="%H:%M:%S")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    level = logger.level
    logger.addHandler(handler)
    if level == logging.NOTSET or level > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def _serve_until_signalled(args: argparse.Namespace) -> None:
    """Serve; SIGTERM and SIGINT stop the server cleanly (its temporary files are removed)."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # not on every platform
            loop.add_signal_handler(sig, task.cancel)
    from asyncsdk.sandbox import serve  # the emulator needs Pillow: a missing one is named here

    with console_log(), contextlib.suppress(asyncio.CancelledError):
        await serve(args.host, args.port, config_from_args(args), port_file=args.port_file)


async def run_resend(args: argparse.Namespace) -> int:
    """``asyncsdk sandbox resend``: POST /_sandbox/deliveries/{id}/resend for the named delivery,
    or each given-up one (``args.all_failed``), of the sandbox at ``args.url``."""
    base = args.url.rstrip("/")
    try:
        async with aiohttp.ClientSession(base_url=base) as session:
            if args.all_failed:
                async with session.get("/_sandbox/stats") as response:
                    deliveries = (await response.json())["deliveries"]
                ids = [d["id"] for d in deliveries if d["finished"] and not d["delivered"]]
            else:
                ids = [args.delivery_id]
            for delivery_id in ids:
                async with session.post(f"/_sandbox/deliveries/{delivery_id}/resend") as response:
                    answer = await response.json()
                if response.status != 200:
                    raise ConfigurationError(str(answer.get("message", answer)))
                print(f"resending {delivery_id} to {mask_url(answer['url'])}")
    except aiohttp.ClientConnectionError as exc:
        raise ConfigurationError(f"no sandbox answers at {base} ({exc}); pass --url") from exc
    if not ids:
        print("no given-up delivery to resend")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_until_signalled(args))
    except ConfigurationError as exc:  # Pillow missing: one line that names the extra
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"error: {start_failure(exc, args)}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
