"""``asyncsdk sandbox`` and ``asyncsdk receiver``: long-running local servers.

Both run until Ctrl-C or SIGTERM, then stop cleanly (in-flight work drained) and exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import secrets
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import attrs
from aiohttp import web

from asyncsdk import ProcessCompleted
from asyncsdk.cli._exits import UsageError
from asyncsdk.cli._local_service import serve_app
from asyncsdk.cli._store_options import NamedStore, add_store_options, named_store, one_of
from asyncsdk.sandbox.__main__ import build_parser as sandbox_options
from asyncsdk.sandbox.__main__ import config_from_args, console_log, run_resend, start_failure
from webhooks import MemoryInbox, NoVerification, TokenVerifier, Verifier, WebhookReceiver
from webhooks.stores import STORES

__all__ = ["add_parsers", "stop_signals"]

TOKEN_ENV = "ASYNCSDK_WEBHOOK_TOKEN"  # noqa: S105 - the name of a variable, not a secret

RECEIVER_DESCRIPTION = f"""\
Receive the service's process.completed webhooks and write each event as one JSON line (to --out,
or stdout).  Deliveries are checked against a secret token in the URL path: register the printed
URL (behind your https terminator) in the dashboard.  The token comes from --token or
{TOKEN_ENV}; without one a fresh token is made and printed.

Events are kept in an inbox until written: in memory by default, or in the store named by
{one_of(STORES, plain_namespaces=False)}.
A store that nodes share also holds the registry each result is published to, so that SDK clients
elsewhere can await it.
"""


def add_parsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sandbox = subparsers.add_parser(
        "sandbox",
        help="run the service emulator on a local port",
        description="Serve the sandbox, a local emulator of the whole service (V3, V1, catalogue, "
        "webhooks), until Ctrl-C.  Point a client at the printed address and key.",
    )
    sandbox_options(sandbox)
    sandbox.set_defaults(handler=run_sandbox)
    actions = sandbox.add_subparsers(title="a running sandbox", metavar="resend", required=False)
    resend = actions.add_parser(
        "resend",
        help="deliver given-up webhooks of a running sandbox again",
        description="Deliver a given-up webhook delivery of a running sandbox again, with the same "
        "event body; its new attempts are added to the delivery's history (shown at /_sandbox/).",
    )
    resend.add_argument(
        "--url",
        default="http://127.0.0.1:8080",
        help="address of the running sandbox (default: %(default)s)",
    )
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("delivery_id", nargs="?", help="a delivery's id, as /_sandbox/stats lists")
    which.add_argument("--all-failed", action="store_true", help="every given-up delivery")
    resend.set_defaults(handler=run_resend)

    receiver = subparsers.add_parser(
        "receiver", help="run a standalone webhook receiver", description=RECEIVER_DESCRIPTION
    )
    receiver.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    receiver.add_argument("--port", type=int, default=8081, help="port to bind (default 8081)")
    receiver.add_argument("--prefix", default="/hooks/", help="URL path of the receiver")
    receiver.add_argument("--out", type=Path, help="append events to this JSON-lines file")
    add_store_options(
        receiver,
        STORES,
        required=False,
        title="the inbox (one of; default: in memory)",
        plain_namespaces=False,  # --prefix is the receiver's URL path
    )
    verify = receiver.add_mutually_exclusive_group()
    verify.add_argument("--token", help=f"the secret path token (default: ${TOKEN_ENV})")
    verify.add_argument(
        "--no-verify",
        action="store_true",
        help="accept deliveries without a token (only behind something that checks them)",
    )
    receiver.set_defaults(handler=run_receiver)


@contextlib.contextmanager
def _signals(stop: Callable[[], None]) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


@contextlib.contextmanager
def stop_signals() -> Iterator[asyncio.Event]:
    """An event set by SIGINT (Ctrl-C) or SIGTERM, caught from the start of the block on.

    Enter it before saying that a server is up: a signal sent as soon as the address is printed
    then stops the server cleanly instead of killing the process.
    """
    stopped = asyncio.Event()
    with _signals(stopped.set):
        yield stopped


async def run_sandbox(args: argparse.Namespace) -> int:
    from asyncsdk.sandbox import Sandbox  # needs Pillow; without it, one line names the extra

    config = config_from_args(args)
    with stop_signals() as stopped, console_log():
        sandbox = Sandbox(config, host=args.host, port=args.port, port_file=args.port_file)
        try:
            await sandbox.start()
        except OSError as exc:
            raise UsageError(start_failure(exc, args)) from exc
        try:
            url, key = sandbox.base_url, sandbox.api_key
            print(f"sandbox serving on {url}")
            print(f"  API key: {key}")
            print(f"  export ASYNCSDK_BASE_URL={url} ASYNCSDK_API_KEY={key}")
            print(f"  processes and webhook deliveries, live: {url}/_sandbox/")
            print("Ctrl-C to stop", flush=True)
            await stopped.wait()
        finally:
            await sandbox.stop()
    print("sandbox stopped", flush=True)
    return 0


def _receiver(named: NamedStore | None, verifier: Verifier) -> WebhookReceiver:
    """A receiver on the named store (on the inbox and registry nodes share, for a store that
    has them: the receiver closes them when it stops), in memory when none is named."""
    if named is None:
        return WebhookReceiver(inbox=MemoryInbox(), verifier=verifier)
    store, place, namespace = named.store, named.place, named.namespace
    if store.open_backend is not None:
        return WebhookReceiver.from_backend(store.open_backend(place, namespace), verifier=verifier)
    return WebhookReceiver(inbox=store.open_inbox(place, namespace), verifier=verifier)


def _fresh_token() -> str:
    """A random path token that does not begin with ``-`` (easier to pass to --token later)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def _verifier(args: argparse.Namespace) -> tuple[Verifier, str]:
    """The verifier, and the path segment to show: a fresh token in full, a given one hidden."""
    if args.no_verify:
        return NoVerification(), ""
    token = args.token or os.environ.get(TOKEN_ENV, "").strip()
    shown = "<your token>"
    if not token:
        token = shown = _fresh_token()
    return TokenVerifier(token), shown


@contextlib.contextmanager
def _sink(path: Path | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
        return
    # The events hold signed result URLs: a file made here is the user's alone.  The path is the
    # user's own choice, so a symlink (/dev/stdout...) is followed.
    path.parent.mkdir(parents=True, exist_ok=True)
    appending = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(appending, "a", encoding="utf-8") as file:
        yield file


async def run_receiver(args: argparse.Namespace) -> int:
    if not args.prefix.startswith("/"):
        raise UsageError(f"--prefix must start with '/', e.g. /hooks/, not {args.prefix!r}")
    prefix = args.prefix if args.prefix.endswith("/") else args.prefix + "/"
    verifier, shown_token = _verifier(args)
    receiver = _receiver(named_store(args, STORES), verifier)

    with _sink(args.out) as out:

        @receiver.on_completed()
        async def write(event: ProcessCompleted) -> None:
            line = attrs.asdict(event)
            line["received_at"] = datetime.datetime.now(datetime.UTC).isoformat()
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            out.flush()

        app = web.Application()
        receiver.setup(app, prefix=prefix)
        with stop_signals() as stopped:
            async with serve_app(app, args.host, args.port) as port:
                path = prefix + shown_token
                shown_host = f"[{args.host}]" if ":" in args.host else args.host
                where = str(args.out) if args.out else "stdout"
                print(f"receiver listening on http://{shown_host}:{port}{prefix}", file=sys.stderr)
                print(f"  register: https://<your host>{path}", file=sys.stderr)
                print(f"  local:    http://{shown_host}:{port}{path}", file=sys.stderr)
                print(f"  events -> {where}; Ctrl-C to stop", file=sys.stderr, flush=True)
                await stopped.wait()
    print("receiver stopped", file=sys.stderr, flush=True)
    return 0
