"""End to end: the sandbox delivers duplicated, reordered webhooks to a mounted receiver."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import aiohttp
from PIL import Image
from whtools import HOOK, TOKEN, Recorder, idle, serve

import asyncsdk
from asyncsdk.sandbox import Sandbox, SandboxConfig
from webhooks import MemoryInbox, Registry, SQLiteInbox, TokenVerifier, WebhookReceiver


def jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 90, 60)).save(buffer, "JPEG")
    return buffer.getvalue()


async def create_processes(sb: Sandbox, count: int) -> list[str]:
    """Raw HTTP, as any caller of the service would."""
    headers = {"x-api-key": sb.api_key}
    async with aiohttp.ClientSession(base_url=sb.base_url, headers=headers) as session:
        form = aiohttp.FormData()
        form.add_field("asset_file", jpeg(), filename="room.jpg", content_type="image/jpeg")
        form.add_field("asset_role", "primary_angle")
        async with session.post("/v3/order", data=form) as response:
            assert response.status == 201, await response.text()
            order = await response.json()
        ids = []
        for _ in range(count):
            body = {
                "order_id": order["order_id"],
                "tool": "tool-day-to-dusk",
                "asset_map": {"tool-day-to-dusk-input-image": order["assets"][0]["id"]},
            }
            async with session.post("/v3/process", json=body) as response:
                assert response.status == 201, await response.text()
                ids.extend((await response.json())["process_ids"])
        return ids


async def test_duplicated_reordered_deliveries_reach_handlers_once(tmp_path: Path) -> None:
    config = SandboxConfig(
        webhook_duplicates=2, webhook_out_of_order=True, failure_rate=0.5, seed=7
    )
    async with (
        Sandbox(config) as sb,
        asyncsdk.Client(api_key=sb.api_key, base_url=sb.base_url) as api,
    ):
        receiver = WebhookReceiver(
            inbox=SQLiteInbox(tmp_path / "hooks.sqlite3"),
            verifier=TokenVerifier(TOKEN),
            client=api,  # fetch-back: handlers see what the API says
            poll_interval=0.05,
        )
        seen = Recorder()
        receiver.on_completed()(seen)
        async with serve(receiver) as http:
            sb.register_webhook(str(http.make_url(HOOK)))
            ids = await create_processes(sb, 8)
            await sb.wait_idle()
            await idle(receiver)

            assert Counter(seen.ids) == Counter(set(ids))  # each process exactly once
            for event in seen.events:
                truth = await api.processes.get(event.process_id)
                assert event.status == truth.status
                assert [a.asset_id for a in event.final_assets] == [
                    a.asset_id for a in truth.final_assets
                ]
            assert {e.status for e in seen.events} == {"done", "failed"}
            assert receiver.metrics.accepted == len(ids)
            assert receiver.metrics.duplicate == 2 * len(ids)
            assert all(d.delivered for d in sb.stats.deliveries)


async def test_a_removal_answered_by_webhook_keeps_its_group_id_for_the_mask_removal() -> None:
    # The event of process.completed carries no process_group_id; run() returned it only when it
    # polled, so a result by webhook could not be handed to after_auto_removal=.
    config = SandboxConfig(pending_delay=0.0, processing_delay=0.05)
    async with (
        Sandbox(config) as sb,
        asyncsdk.Client(api_key=sb.api_key, base_url=sb.base_url) as api,
    ):
        registry = Registry()
        receiver = WebhookReceiver(
            inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), registry=registry
        )
        async with serve(receiver) as http:
            sb.register_webhook(str(http.make_url(HOOK)))
            auto = await api.run(
                asyncsdk.ToolSlug.ITEM_REMOVAL,
                jpeg(),
                registry=registry,
                timeout=30,
                webhook_grace=30,  # no polling: the result comes by webhook or not at all
            )
            assert auto.process_group_id
            removal = await api.run_mask_removal(
                jpeg(),
                rectangles=[(4, 4, 20, 20)],
                after_auto_removal=auto,
                registry=registry,
                timeout=30,
                webhook_grace=30,
            )
            assert sb.stats.processes_created == 2
        assert removal.process_group_id == auto.process_group_id
        assert (await api.processes.get(removal.id)).process_group_id == auto.process_group_id


async def _one_run_into(inbox_file: Path, config: SandboxConfig) -> tuple[str, list[str]]:
    """One sandbox run delivering one process to a receiver over the kept ``inbox_file``: the
    process id, and the ids the handler ran for."""
    async with Sandbox(config) as sb:
        receiver = WebhookReceiver(inbox=SQLiteInbox(inbox_file), verifier=TokenVerifier(TOKEN))
        seen = Recorder()
        receiver.on_completed()(seen)
        async with serve(receiver) as http:
            sb.register_webhook(str(http.make_url(HOOK)))
            [process_id] = await create_processes(sb, 1)
            await sb.wait_idle()
            await idle(receiver)
            assert all(d.delivered for d in sb.stats.deliveries)
        return process_id, seen.ids


async def test_a_kept_inbox_handles_the_next_sandbox_runs_process(tmp_path: Path) -> None:
    # Two runs of the sandbox, as after a restart; the receiver keeps its SQLite inbox file.
    inbox_file = tmp_path / "inbox.db"
    first, handled_first = await _one_run_into(inbox_file, SandboxConfig())
    second, handled_second = await _one_run_into(inbox_file, SandboxConfig())
    assert first != second
    assert handled_first == [first]
    assert handled_second == [second]  # not taken for the first run's event


async def test_a_seed_repeats_the_ids_so_a_kept_inbox_skips_them(tmp_path: Path) -> None:
    inbox_file = tmp_path / "inbox.db"
    first, handled_first = await _one_run_into(inbox_file, SandboxConfig(seed=3))
    second, handled_second = await _one_run_into(inbox_file, SandboxConfig(seed=3))
    assert first == second
    assert handled_first == [first]
    assert handled_second == []  # a duplicate to the kept inbox: the reason to leave out a seed
