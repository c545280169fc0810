"""The per-client catalogue cache: first use, TTL, single flight, invalidation, failures."""

from __future__ import annotations

import asyncio
import math

import pytest
from catalogue_fixture import CatalogueSource, Clock

from asyncsdk import APIConnectionError, CatalogueCache, ConfigurationError, NotFoundError, ToolSlug

VS = ToolSlug.VIRTUAL_STAGING


async def test_fetched_on_first_use_then_served_from_the_cache(
    source: CatalogueSource, clock: Clock
) -> None:
    cache = source.cache(clock=clock)
    assert cache.peek() is None
    assert source.tool_calls == 0
    for _ in range(3):
        catalogue = await cache.catalogue(VS)
        assert catalogue.widget(VS, "space").slug == "widget-space-tool-virtual-staging"
    assert source.tool_calls == 1
    assert source.widget_calls == [VS]
    snapshot = cache.peek()
    assert snapshot is not None
    assert snapshot.has_widgets_of(VS)


async def test_refreshed_after_the_ttl(source: CatalogueSource, clock: Clock) -> None:
    cache = source.cache(clock=clock, ttl=60.0)
    await cache.tools()
    clock.now += 59.0
    await cache.tools()
    assert source.tool_calls == 1
    clock.now += 2.0
    await cache.tools()
    assert source.tool_calls == 2
    await cache.widgets(VS)
    clock.now += 61.0
    await cache.widgets(VS)
    assert source.widget_calls == [VS, VS]


async def test_a_thousand_concurrent_callers_cause_one_fetch_each(
    source: CatalogueSource,
) -> None:
    source.gate = asyncio.Event()
    cache = source.cache()
    runs = [asyncio.create_task(cache.catalogue(VS)) for _ in range(1000)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert source.tool_calls == 1
    assert not any(run.done() for run in runs)
    source.gate.set()
    snapshots = await asyncio.gather(*runs)
    assert source.tool_calls == 1
    assert source.widget_calls == [VS]
    assert all(snapshot.widgets_of(VS) == snapshots[0].widgets_of(VS) for snapshot in snapshots)
    assert len(snapshots[0].widgets_of(VS)) > 0


async def test_one_flight_per_key(source: CatalogueSource) -> None:
    cache = source.cache()
    await asyncio.gather(
        *(cache.widgets(slug) for slug in [VS, VS, ToolSlug.IMAGE_ENHANCEMENT] * 10)
    )
    assert sorted(source.widget_calls) == sorted([VS, ToolSlug.IMAGE_ENHANCEMENT])


async def test_invalidate_fetches_again(source: CatalogueSource) -> None:
    cache = source.cache()
    await cache.catalogue(VS, ToolSlug.IMAGE_ENHANCEMENT)
    cache.invalidate(VS)
    await cache.catalogue(VS, ToolSlug.IMAGE_ENHANCEMENT)
    assert source.tool_calls == 1
    assert sorted(source.widget_calls) == sorted([VS, VS, ToolSlug.IMAGE_ENHANCEMENT])
    cache.invalidate()
    assert cache.peek() is None
    await cache.tools()
    assert source.tool_calls == 2


async def test_answer_of_a_fetch_in_flight_during_invalidate_is_not_kept(
    source: CatalogueSource,
) -> None:
    source.gate = asyncio.Event()
    cache = source.cache()
    first = asyncio.create_task(cache.tools())
    await asyncio.sleep(0)
    cache.invalidate()
    source.gate.set()
    assert len(await first) == len(source.tools)
    assert cache.peek() is None
    await cache.tools()
    assert source.tool_calls == 2


async def test_a_cancelled_caller_does_not_cancel_the_shared_fetch(
    source: CatalogueSource,
) -> None:
    source.gate = asyncio.Event()
    cache = source.cache()
    quitter = asyncio.create_task(cache.tools())
    stayer = asyncio.create_task(cache.tools())
    await asyncio.sleep(0)
    quitter.cancel()
    source.gate.set()
    assert len(await stayer) == len(source.tools)
    assert quitter.cancelled()
    assert source.tool_calls == 1


async def test_failed_first_fetch_reaches_every_caller_and_is_retried(
    source: CatalogueSource,
) -> None:
    source.failures = 1
    cache = source.cache()
    results = await asyncio.gather(cache.tools(), cache.tools(), return_exceptions=True)
    assert all(isinstance(r, APIConnectionError) for r in results)
    assert source.tool_calls == 1
    assert len(await cache.tools()) == len(source.tools)
    assert source.tool_calls == 2


async def test_failed_refresh_serves_the_previous_catalogue(
    source: CatalogueSource, clock: Clock
) -> None:
    cache = source.cache(clock=clock, ttl=10.0)
    before = await cache.tools()
    clock.now += 11.0
    source.failures = 1
    assert await cache.tools() == before
    assert source.tool_calls == 2
    strict = source.cache(clock=clock, ttl=10.0, stale_on_error=False)
    await strict.tools()
    clock.now += 11.0
    source.failures = 1
    with pytest.raises(APIConnectionError):
        await strict.tools()


async def test_unknown_tool_widgets_raise_not_found(source: CatalogueSource) -> None:
    with pytest.raises(NotFoundError):
        await source.cache().widgets("tool-nope")


def test_ttl_must_be_positive_and_finite(source: CatalogueSource) -> None:
    with pytest.raises(ConfigurationError, match="ttl must be a finite number of seconds > 0"):
        CatalogueCache(source.fetch_tools, source.fetch_widgets, ttl=0)
    with pytest.raises(ConfigurationError, match="ttl must be a finite number of seconds > 0"):
        CatalogueCache(source.fetch_tools, source.fetch_widgets, ttl=math.inf)
