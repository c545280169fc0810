"""Which handlers run for an event, and what a handler may declare when it registers."""

from __future__ import annotations

import asyncio

import pytest
from whtools import HOOK, JSON, Recorder, encode, idle, make_receiver, payload, serve

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import DeliveryInfo, KnownProcessFilter


def test_a_handler_with_too_many_parameters_is_refused_at_registration() -> None:
    receiver = make_receiver()

    async def three(event: ProcessCompleted, info: DeliveryInfo, extra: int) -> None: ...

    with pytest.raises(ConfigurationError, match=r"takes \(event\) or \(event, info\)"):
        receiver.on_completed()(three)


async def test_handlers_are_chosen_by_status_and_tool() -> None:
    receiver = make_receiver()
    every, done, dusk, both = Recorder(), Recorder(), Recorder(), Recorder()
    receiver.on_completed()(every)
    receiver.on_completed(status="done")(done)
    receiver.on_completed(tool="tool-day-to-dusk")(dusk)
    receiver.on_completed(status=["failed"], tool=["tool-day-to-dusk", "tool-x"])(both)
    async with serve(receiver) as client:
        for pid, status, tool in [
            ("a", "done", "tool-virtual-staging"),
            ("b", "failed", "tool-day-to-dusk"),
            ("c", "done", "tool-day-to-dusk"),
        ]:
            response = await client.post(
                HOOK, data=encode(payload(pid, status=status, tool=tool)), headers=JSON
            )
            assert response.status == 200
        await idle(receiver)
    assert sorted(every.ids) == ["a", "b", "c"]
    assert sorted(done.ids) == ["a", "c"]
    assert sorted(dusk.ids) == ["b", "c"]
    assert both.ids == ["b"]


def test_handler_filters_must_name_something() -> None:
    receiver = make_receiver()
    with pytest.raises(ConfigurationError, match="status"):
        receiver.on_completed(status=[])
    with pytest.raises(ConfigurationError, match="tool"):
        receiver.on_completed(tool="")


async def test_known_process_filter_drops_foreign_ids() -> None:
    known = {"mine-1"}
    receiver = make_receiver(process_filter=KnownProcessFilter(known))
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        for pid in ("mine-1", "theirs-1"):
            response = await client.post(HOOK, data=encode(payload(pid)), headers=JSON)
            assert response.status == 200
        assert await response.json() == {"status": "ignored"}
        await idle(receiver)
    assert seen.ids == ["mine-1"]
    assert receiver.metrics.ignored["unknown_process"] == 1


async def test_known_process_filter_takes_an_async_lookup() -> None:
    async def lookup(process_id: str) -> bool:
        await asyncio.sleep(0)
        return process_id.startswith("mine")

    check = KnownProcessFilter(lookup)
    assert await check("mine-2")
    assert not await check("other")
