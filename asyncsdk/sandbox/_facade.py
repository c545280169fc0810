"""The :class:`Sandbox` facade: run the emulator on 127.0.0.1 and steer it from a test."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aiohttp import web
from yarl import URL

from asyncsdk.sandbox._chaos import Chaos
from asyncsdk.sandbox._config import DEFAULT_API_KEY, SandboxConfig, check_webhook_url
from asyncsdk.sandbox._edge import build_app
from asyncsdk.sandbox._live import Runtime
from asyncsdk.sandbox._stats import Stats

if TYPE_CHECKING:
    from asyncsdk import Client

__all__ = ["Sandbox", "run_forever"]


class Sandbox:
    """The service emulator, served over real HTTP.

    ::

        async with Sandbox(SandboxConfig(processing_delay=0.1)) as sb:
            ...  # talk to sb.base_url with the header x-api-key: sb.api_key
            await sb.wait_idle()
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        port_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self._config = config if config is not None else SandboxConfig()
        self._host = host
        self._port = port
        self._port_file = None if port_file is None else Path(port_file)
        self._runtime = Runtime(self._config)
        self._app = build_app(self._runtime)
        self._runner: web.AppRunner | None = None
        self._base_url = ""

    # ----------------------------------------------------------------- running

    async def start(self) -> None:
        """Bind and serve; ``base_url`` is known afterwards, and written to ``port_file``."""
        if self._runner is not None:
            raise RuntimeError("this sandbox is already running; a Sandbox starts once")
        runner = web.AppRunner(
            self._app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        port = self._bound_port(runner)
        self._base_url = str(URL.build(scheme="http", host=self._host, port=port))  # [::1]
        self._runtime.public_base = self._base_url
        if self._port_file is not None:
            try:
                _write_port_file(self._port_file, port)
            except BaseException:
                # A sandbox whose start failed serves nothing and holds nothing.
                self._runner = None
                await runner.cleanup()
                raise

    @staticmethod
    def _bound_port(runner: web.AppRunner) -> int:
        for address in runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                return int(address[1])
        raise RuntimeError("the sandbox did not bind a TCP port")

    async def stop(self) -> None:
        """Stop serving, cancel processes and deliveries still running, remove the files."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
            if self._port_file is not None:
                self._port_file.unlink(missing_ok=True)

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --------------------------------------------------------------- steering

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the V3, V1 and widgets endpoints."""
        if not self._base_url:
            raise RuntimeError("the sandbox is not started; use `async with Sandbox() as sb`")
        return self._base_url

    @property
    def app_url(self) -> str:
        """The catalogue host (``/api/tools``): the same server."""
        return self.base_url

    @property
    def api_key(self) -> str:
        return DEFAULT_API_KEY

    def client(self, **options: Any) -> Client:
        """A :class:`~asyncsdk.Client` of this sandbox (its URLs and key), paced for tests.

        Polls and retry backoff are milliseconds apart instead of seconds (``min_poll_interval``
        0.01 s, ``backoff_initial`` 0.001 s, ``backoff_max`` 0.005 s), and the generation limit
        is the sandbox's (``rate_limit_count`` per ``rate_limit_window``) when ``rate_limit`` is
        on, else 10 per 0.01 s; ``options`` override those and take any other ``Client``
        setting.  Use it as ``async with sb.client() as client:``.
        """
        from asyncsdk import Client, GenerationLimit

        config = self._config
        window = config.rate_limit_window if config.rate_limit else 0.01
        options.setdefault(
            "generation_limit", GenerationLimit(max_calls=config.rate_limit_count, period=window)
        )

        options.setdefault("api_key", self.api_key)
        options.setdefault("min_poll_interval", 0.01)
        options.setdefault("backoff_initial", 0.001)
        options.setdefault("backoff_max", 0.005)
        return Client(base_url=self.base_url, app_url=self.app_url, **options)

    @property
    def config(self) -> SandboxConfig:
        """The live settings; changes apply to the next request or process."""
        return self._config

    @property
    def chaos(self) -> Chaos:
        return self._runtime.chaos

    @property
    def stats(self) -> Stats:
        return self._runtime.stats

    @property
    def app(self) -> web.Application:
        return self._app

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions of background tasks (empty unless the sandbox itself has a defect)."""
        return self._runtime.errors

    def register_webhook(self, url: str) -> None:
        """Deliver ``process.completed`` to ``url`` too (http is accepted for local receivers);
        ``ValueError`` says how to write a URL without scheme, host or valid port."""
        check_webhook_url(url)
        if url not in self._runtime.registered_webhooks:
            self._runtime.registered_webhooks.append(url)

    def advance(self) -> None:
        """Move every process held by an infinite delay one state on.

        With ``pending_delay=math.inf`` a process stays ``pending`` until ``advance()``; with
        ``processing_delay=math.inf`` it then stays ``processing`` until the next ``advance()``.
        This is the clock tests control without timing anything.
        """
        self._runtime.advance()

    async def wait_idle(self, timeout: float | None = 30.0) -> None:
        """Wait until every process has finished and every webhook delivery has settled."""
        async with asyncio.timeout(timeout):
            await self._runtime.wait_idle()


def _write_port_file(path: Path, port: int) -> None:
    """Write ``port`` and a newline to ``path`` in one step: a reader never sees half a number."""
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(f"{port}\n", encoding="ascii")
    try:
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


async def run_forever(
    host: str = "127.0.0.1",
    port: int = 8080,
    config: SandboxConfig | None = None,
    *,
    port_file: str | os.PathLike[str] | None = None,
) -> None:
    """Serve until cancelled (Ctrl-C); what ``python -m asyncsdk.sandbox`` runs.

    With ``port_file``, the bound port is written there once serving (and the file removed at
    the end): the way to learn the port picked by ``port=0``.
    """
    async with Sandbox(config, host=host, port=port, port_file=port_file) as sb:
        print(f"sandbox serving on {sb.base_url} (API key: {sb.api_key})", flush=True)
        print(f"processes and webhook deliveries, live: {sb.base_url}/_sandbox/", flush=True)
        await asyncio.Event().wait()
