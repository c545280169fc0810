"""``client.run_steps``: a journalled run with an upload and a result of the caller's own, on the
step logic of keyed runs, against the sandbox."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from asyncsdk import (
    KeyReusedError,
    PreparedProcess,
    Process,
    RunSteps,
    ToolSlug,
    Upload,
    ValidationError,
)
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox

STAGING = {"space": "bedroom", "style": "modern"}
ROOM = sample("bedroom-empty.jpg")
ARGUMENTS = json.dumps({"photo": "bedroom-empty.jpg"})


async def test_every_process_is_waited_for_and_what_finish_returns_is_the_keys_result(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    sandbox.config.processes_per_request = 2  # one creation, two processes, each paid for
    finished: list[list[str]] = []
    async with sandbox.client(journal=tmp_path / "runs.sqlite3") as client:

        async def upload() -> tuple[str, PreparedProcess]:
            order = await client.orders.create(Upload(ROOM))
            prepared = await client.processes.prepare(
                ToolSlug.VIRTUAL_STAGING, None, STAGING, order_assets=order.assets
            )
            return order.order_id, prepared

        async def finish(processes: Sequence[Process]) -> str:
            finished.append([process.status for process in processes])
            return json.dumps(sorted(process.id for process in processes))

        steps = RunSteps(upload=upload, finish=finish, wait_every=True)
        first = await client.run_steps("listing-42", ARGUMENTS, steps)
        again = await client.run_steps("listing-42", ARGUMENTS, steps)
        with pytest.raises(KeyReusedError) as reused:
            await client.run_steps("listing-42", json.dumps({"photo": "kitchen.jpg"}), steps)
    assert finished == [["done", "done"]]  # both waited for, and finished once
    assert again == first
    assert len(json.loads(first)) == 2
    assert sandbox.stats.processes_created == 2
    assert sandbox.stats.orders_created == 1
    assert "photo" in reused.value.differences


async def test_arguments_that_are_not_a_json_object_are_refused_before_anything_is_paid(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    async with sandbox.client(journal=tmp_path / "runs.sqlite3") as client:

        async def upload() -> tuple[str, PreparedProcess]:
            raise AssertionError("nothing is uploaded for refused arguments")

        async def finish(processes: Sequence[Process]) -> str:
            return ""

        steps = RunSteps(upload=upload, finish=finish)
        with pytest.raises(ValidationError, match="JSON object"):
            await client.run_steps("k", "bedroom-empty.jpg", steps)
    assert sandbox.stats.orders_created == 0
