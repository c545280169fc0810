"""A whole local setup in one process: the sandbox, a webhook receiver and a registry.

The receiver is an aiohttp app on 127.0.0.1 (a free port) with the :class:`~webhooks.
WebhookReceiver` mounted at ``/hooks/``; its URL, with a random token as the last path segment, is
registered with the sandbox.  Waiting on a process then means awaiting its webhook in the
:class:`~webhooks.Registry`, as a production service would.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import attrs
from aiohttp import web

from asyncsdk import Client
from asyncsdk.sandbox import SandboxConfig
from webhooks import MemoryInbox, Registry, TokenVerifier, Verifier, WebhookReceiver

if TYPE_CHECKING:
    from asyncsdk.sandbox import Sandbox

__all__ = ["LocalService", "local_service", "serve_app"]


@attrs.frozen
class LocalService:
    """The running pieces; ``client()`` makes a client pointed at the sandbox."""

    sandbox: Sandbox
    receiver: WebhookReceiver
    registry: Registry
    webhook_url: str

    def client(self, min_poll_interval: float = 0.5) -> Client:
        # The sandbox has no polling limit; polls are only the fallback when a webhook is late.
        return Client(
            api_key=self.sandbox.api_key,
            base_url=self.sandbox.base_url,
            app_url=self.sandbox.app_url,
            min_poll_interval=min_poll_interval,
            # `process` paces creations itself (with --generation-limit, the sandbox enforces
            # the same limit); the demo's five jobs fit in any window.
            generation_limit=None,
        )


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, host: str, port: int) -> AsyncIterator[int]:
    """Serve ``app`` on ``host:port`` (0 picks a free port) and yield the port bound."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        except BaseException:
            sock.close()
            raise
        site = web.SockSite(runner, sock)
        await site.start()
        yield int(sock.getsockname()[1])
    finally:
        await runner.cleanup()


def _token_verifier(token: str) -> Verifier:
    return TokenVerifier(token)


@contextlib.asynccontextmanager
async def local_service(config: SandboxConfig) -> AsyncIterator[LocalService]:
    """Start the receiver, then the sandbox delivering to it; stop both on exit."""
    from asyncsdk.sandbox import Sandbox  # needs Pillow; without it, one line names the extra

    registry = Registry()
    token = secrets.token_urlsafe(24)
    receiver = WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=_token_verifier(token),
        registry=registry,
        drain_timeout=1.0,
    )
    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    async with registry, serve_app(app, "127.0.0.1", 0) as port:
        url = f"http://127.0.0.1:{port}/hooks/{token}"
        async with Sandbox(config) as sandbox:
            sandbox.register_webhook(url)
            yield LocalService(
                sandbox=sandbox, receiver=receiver, registry=registry, webhook_url=url
            )
