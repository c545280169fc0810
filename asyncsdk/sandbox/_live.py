"""The live parts of a running sandbox: background tasks, the process clock and webhook fan-out."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import aiohttp
import attrs

from asyncsdk import MaskError
from asyncsdk.sandbox import _images
from asyncsdk.sandbox._chaos import Chaos
from asyncsdk.sandbox._config import SandboxConfig
from asyncsdk.sandbox._files import FileStore
from asyncsdk.sandbox._records import ProcessRecord, StoredFile
from asyncsdk.sandbox._state import SandboxState
from asyncsdk.sandbox._stats import Delivery, Stats
from asyncsdk.sandbox._webhooks import deliver
from asyncsdk.sandbox._wire import Urls, webhook_json

__all__ = ["Runtime"]

log = logging.getLogger("asyncsdk.sandbox")


@attrs.define
class Runtime:
    """Shared by the aiohttp handlers and the :class:`~asyncsdk.sandbox.Sandbox` facade."""

    config: SandboxConfig
    stats: Stats = attrs.Factory(Stats)
    state: SandboxState = attrs.field(init=False)
    chaos: Chaos = attrs.field(init=False)
    files: FileStore | None = None
    session: aiohttp.ClientSession | None = None
    executor: ThreadPoolExecutor | None = None
    public_base: str = ""
    registered_webhooks: list[str] = attrs.Factory(list)
    errors: list[BaseException] = attrs.Factory(list)
    _tasks: set[asyncio.Task[None]] = attrs.Factory(set)
    _rng: random.Random = attrs.field(init=False)
    _gate: asyncio.Event = attrs.Factory(asyncio.Event)
    _payloads: dict[str, Callable[[str], dict[str, Any]]] = attrs.Factory(dict)
    _ticks: int = 0

    def __attrs_post_init__(self) -> None:
        self.state = SandboxState(self.config, self.stats)
        self.chaos = Chaos(random.Random(f"chaos-{self.config.seed or 0}"))  # noqa: S311 - test double
        self._rng = random.Random(f"webhooks-{self.config.seed or 0}")  # noqa: S311 - test double

    # ------------------------------------------------------------ start/stop

    async def start(self) -> None:
        self.files = FileStore.create()
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sandbox-images")
        self.session = aiohttp.ClientSession()

    async def stop(self) -> None:
        """Cancel what still runs, close the webhook session, remove every file."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
        if self.files is not None:
            self.files.remove_all()

    @property
    def store(self) -> FileStore:
        if self.files is None:
            raise RuntimeError("the sandbox application is not running")
        return self.files

    # ----------------------------------------------------------------- tasks

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` in the background, holding a strong reference until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.errors.append(exc)
            log.error("sandbox background task failed", exc_info=exc)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def wait_idle(self) -> None:
        """Return once no process runs and no webhook delivery is under way."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    async def in_thread(self, func: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, partial(func, *args))

    # ------------------------------------------------------------- processes

    def launch(self, process: ProcessRecord) -> None:
        self.spawn(self._run(process, self._ticks))

    def advance(self) -> None:
        """Release every process held by an infinite delay: each moves one state on.

        A process held at a stage that began before this call is released, even if it is still
        rendering when the call is made.
        """
        self._ticks += 1
        gate, self._gate = self._gate, asyncio.Event()
        gate.set()

    async def _pause(self, delay: float, since: int) -> None:
        if math.isinf(delay):
            while self._ticks <= since:
                await self._gate.wait()
        else:
            await asyncio.sleep(max(0.0, delay))

    async def _run(self, process: ProcessRecord, since: int) -> None:
        loop = asyncio.get_running_loop()
        await self._pause(self.config.pending_delay, since)
        self.state.start_processing(process)
        since = self._ticks
        started = loop.time()
        result: StoredFile | None = None
        if not process.will_fail:
            try:
                result = await self._render(process)
            except (OSError, ValueError, MaskError) as exc:
                log.warning("process %s failed to render: %s", process.id, exc)
        await self._pause(self.config.processing_delay - (loop.time() - started), since)
        self.state.finish(process, result)
        self.dispatch(process)

    async def _render(self, process: ProcessRecord) -> StoredFile:
        store = self.store
        inputs = {
            slot: store.path(self.state.assets[asset_id].file)
            for slot, asset_id in process.asset_map.items()
        }
        file_id = store.new_id()
        out = StoredFile(id=file_id, name="result.jpg", format="jpeg", width=0, height=0)
        width, height = await self.in_thread(
            _images.render_tool,
            process.tool_def.slug,
            inputs,
            process.item_slugs,
            store.path(out),
        )
        out.width, out.height = width, height
        return store.register(out)

    # -------------------------------------------------------------- webhooks

    @property
    def webhook_urls(self) -> list[str]:
        return list(dict.fromkeys([*self.config.webhook_urls, *self.registered_webhooks]))

    def dispatch(self, process: ProcessRecord) -> None:
        """Schedule the deliveries of ``process.completed`` to every registered URL."""
        if self.session is None:
            return
        cfg = self.config
        base = self.public_base

        def payload(token: str) -> dict[str, Any]:
            return webhook_json(process, Urls(base, token=token))

        for url in self.webhook_urls:
            copies = 1 + max(0, cfg.webhook_duplicates)
            if cfg.webhook_duplicate_rate and self._rng.random() < cfg.webhook_duplicate_rate:
                copies += 1
            for copy in range(copies):
                record = Delivery(url=url, process_id=process.id, status=process.status, copy=copy)
                self.stats.deliveries.append(record)
                jitter = (
                    self._rng.uniform(0, cfg.webhook_max_jitter) if cfg.webhook_out_of_order else 0
                )
                self._payloads[record.id] = payload
                self.spawn(deliver(self.session, cfg, record, payload, jitter))

    def resend(self, delivery_id: str) -> Delivery:
        """Deliver a given-up delivery's event again, with the same body, its new attempts
        appended to the same record; ``KeyError`` for an unknown id, ``ValueError`` for a
        delivery that did not give up."""
        found = [d for d in self.stats.deliveries if d.id == delivery_id]
        if not found:
            raise KeyError(delivery_id)
        record = found[0]
        if not record.finished or record.delivered or self.session is None:
            raise ValueError(
                f"delivery {delivery_id} has not given up: only a failed one is resent"
            )
        record.finished = False
        self.spawn(deliver(self.session, self.config, record, self._payloads[delivery_id], 0))
        return record
