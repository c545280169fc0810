"""Shared test tools: a host app with the receiver mounted, payloads, fake inboxes, waiting, and
what a receiver process recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from node_process import node_running

from asyncsdk import ProcessCompleted, ResultAsset
from webhooks import (
    EventReceiver,
    Inbox,
    InboxEntry,
    InboxUnavailableError,
    MemoryInbox,
    NoVerification,
    TokenVerifier,
    WebhookReceiver,
)

T = TypeVar("T")

TOKEN = "tok-" + "a1b2c3d4" * 4
OLD_TOKEN = "old-" + "z9y8x7w6" * 4
HOOK = f"/hooks/{TOKEN}"
JSON = {"Content-Type": "application/json"}


def payload(
    process_id: str = "proc-1",
    status: str = "done",
    tool: str = "tool-virtual-staging",
    **extra: Any,
) -> dict[str, Any]:
    """A ``process.completed`` body as the service sends it."""
    assets = (
        [
            {
                "asset_id": f"{process_id}-out",
                "asset_type": "image",
                "temp_src": f"https://cdn.example/{process_id}.jpg?sig=1",
                "temp_thumbnail_src": f"https://cdn.example/{process_id}-t.jpg?sig=1",
            }
        ]
        if status == "done"
        else []
    )
    body: dict[str, Any] = {
        "event": "process.completed",
        "process_id": process_id,
        "order_id": "order-1",
        "tool": tool,
        "status": status,
        "final_assets": assets,
    }
    body.update(extra)
    return body


def encode(body: Any) -> bytes:
    return json.dumps(body).encode()


def event(process_id: str = "p-1", status: str = "done", src: str = "u1") -> ProcessCompleted:
    """A parsed ``process.completed`` event, as an inbox stores it and a registry hands it out."""
    return ProcessCompleted(
        event="process.completed",
        process_id=process_id,
        order_id="o-1",
        tool="tool-virtual-staging",
        status=status,
        final_assets=(ResultAsset(asset_id="a-1", src=src),) if status == "done" else (),
    )


def make_receiver(inbox: Inbox | None = None, **options: Any) -> WebhookReceiver:
    """A receiver on ``inbox`` (a fresh :class:`MemoryInbox` by default) taking ``TOKEN`` and
    ``OLD_TOKEN``, its workers polling every 50 ms; ``options`` as ``WebhookReceiver`` takes."""
    return WebhookReceiver(
        inbox=inbox if inbox is not None else MemoryInbox(),
        verifier=TokenVerifier([TOKEN, OLD_TOKEN]),
        poll_interval=0.05,
        **options,
    )


def bare_receiver(inbox: Inbox, **options: Any) -> WebhookReceiver:
    """A receiver that verifies nothing, for tests that store events in ``inbox`` themselves
    and start it without serving it."""
    return WebhookReceiver(inbox=inbox, verifier=NoVerification(), **options)


@contextlib.asynccontextmanager
async def serve(
    receiver: WebhookReceiver | EventReceiver,
    *,
    prefix: str = "/hooks/",
    server_options: dict[str, Any] | None = None,
    middlewares: Sequence[Any] = (),
    **app_options: Any,
) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    """Mount ``receiver`` in a host app and serve it on 127.0.0.1; stop everything on exit."""
    app = web.Application(middlewares=middlewares, **app_options)

    async def home(_: web.Request) -> web.Response:
        return web.Response(text="host app")

    app.router.add_get("/", home)
    receiver.setup(app, prefix=prefix)
    server = TestServer(app, host="127.0.0.1")
    # TestServer takes runner options here only; it always runs with handler_cancellation=True,
    # the setting under which a client hanging up cancels the request handler.
    await server.start_server(**(server_options or {}))
    async with TestClient(server) as client:
        yield client


async def eventually(
    probe: Callable[[], Awaitable[T]], what: str, limit: float = 10.0, step: float = 0.01
) -> T:
    """Poll ``probe`` until it returns something truthy, and return that.

    A guard against hanging, not a speed assertion: ``limit`` only bounds a broken test.  Polling
    (not an Event) because the state polled lives in another process, a database or a server.
    """
    try:
        async with asyncio.timeout(limit):
            while True:
                value = await probe()
                if value:
                    return value
                await asyncio.sleep(step)
    except TimeoutError:
        raise AssertionError(f"still waiting for: {what}") from None


async def wait_until(condition: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Poll a plain condition until it holds."""

    async def probe() -> bool:
        return condition()

    await eventually(probe, what, limit)


async def idle(receiver: WebhookReceiver, limit: float = 10.0) -> None:
    """Wait until the receiver has nothing stored and nothing running."""
    pool = receiver._pool

    async def settled() -> bool:
        return pool.in_flight == 0 and await receiver.inbox.pending_count() == 0

    await eventually(settled, "the receiver to settle", limit)


def recorded(tmp_path: Path) -> list[str]:
    """The lines receiver processes appended to ``tmp_path / "record.txt"``, sorted (none while
    the file is not there)."""
    path = tmp_path / "record.txt"
    return sorted(path.read_text().splitlines()) if path.exists() else []


@contextlib.asynccontextmanager
async def crash_test_receiver(
    script: Path, tmp_path: Path, name: str, mode: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A crash test's receiver process (``receiver_script.py``, or the same receiver served by
    ``asgi_receiver_script.py``) on the test's SQLite inbox, appending to what :func:`recorded`
    reads: the process and its hook URL, for the block."""
    args = (str(tmp_path / "inbox.sqlite3"), name, str(tmp_path / "record.txt"), mode)
    async with node_running(script, *args, name=name) as (proc, port):
        yield proc, f"http://127.0.0.1:{port}/hooks/{TOKEN}"


class Recorder:
    """A handler that records every event it is called with."""

    def __init__(self) -> None:
        self.events: list[ProcessCompleted] = []

    async def __call__(self, event: ProcessCompleted) -> None:
        self.events.append(event)

    @property
    def ids(self) -> list[str]:
        return [e.process_id for e in self.events]


class GatedInbox(MemoryInbox):
    """A memory inbox whose puts queue until the test's go-ahead, as a slow store's would."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self._writes: set[asyncio.Task[None]] = set()

    async def put(self, event: ProcessCompleted, raw: bytes) -> bool:
        return await self.submit_put(event, raw)

    def submit_put(self, event: ProcessCompleted, raw: bytes) -> asyncio.Future[bool]:
        parent = super()
        return self._after_gate(lambda: parent.put(event, raw))

    def submit_put_claimed(
        self, event: ProcessCompleted, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        parent = super()
        return self._after_gate(lambda: parent.submit_put_claimed(event, raw, consumer))

    def _after_gate(self, write: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """Start ``write`` once the gate opens; the future gets its answer."""
        self.entered.set()
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        async def gated() -> None:
            await self.gate.wait()
            value = await write()
            if not answer.done():
                answer.set_result(value)

        task = asyncio.ensure_future(gated())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return answer


class SwitchableInbox(MemoryInbox):
    """A memory inbox whose store can be switched off, as a Redis or disk outage would."""

    down: bool = False

    async def put(self, event: ProcessCompleted, raw: bytes) -> bool:
        return await self.submit_put(event, raw)

    def submit_put(self, event: ProcessCompleted, raw: bytes) -> asyncio.Future[bool]:
        if self.down:
            raise InboxUnavailableError("store switched off by the test")
        return super().submit_put(event, raw)

    def submit_put_claimed(
        self, event: ProcessCompleted, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        if self.down:
            raise InboxUnavailableError("store switched off by the test")
        return super().submit_put_claimed(event, raw, consumer)

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        if self.down:
            raise InboxUnavailableError("store switched off by the test")
        return await super().claim_batch(consumer, limit)


def cancellation_watch() -> tuple[Any, asyncio.Event]:
    """A middleware that sets the returned event when a request handler is cancelled (with
    ``handler_cancellation=True``, as the test server runs, hanging up cancels the handler)."""
    cancelled = asyncio.Event()

    @web.middleware
    async def watch(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return watch, cancelled


def statuses(answers: Sequence[dict[str, Any]]) -> list[str]:
    return [a.get("status", "") for a in answers]


async def inbox_stats(*store: str) -> tuple[dict[str, str], str]:
    """``asyncsdk inbox stats STORE...`` as an operator runs it: its lines by name, and all it
    printed (for a look for what must not show); fails the test when the command fails."""
    cli = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "asyncsdk", "inbox", "stats", *store),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await cli.communicate()
    assert cli.returncode == 0, err
    shown = dict(line.split(None, 1) for line in out.decode().splitlines())
    return shown, out.decode() + err.decode()
