"""Metrics, traces and logs of a photo's whole path: the client uploads and creates a process in
the sandbox, the sandbox delivers the webhook to a receiver, a handler runs, the waiting client
wakes.  Read back as operators would: the metrics scraped over HTTP and parsed with
prometheus-client's parser, the spans from the OpenTelemetry SDK's in-memory exporter, the log
records as a log handler gets them."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from inbox_contract import event
from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes
from PIL import Image
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from whtools import HOOK, JSON, TOKEN, encode, eventually, idle, payload, serve

from asyncsdk import (
    PROCESS_ID_ATTRIBUTE,
    ClientTelemetry,
    ConfigurationError,
    ProcessCompleted,
    ProcessStatus,
    ToolSlug,
)
from asyncsdk.sandbox import Sandbox
from webhooks import (
    InboxStats,
    InboxUnavailableError,
    MemoryInbox,
    ReceiverTelemetry,
    RedactingAccessLogger,
    Registry,
    TokenVerifier,
    WebhookReceiver,
    metrics_app,
)


def jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 90, 60)).save(buffer, "JPEG")
    return buffer.getvalue()


def tracing(sampler: Sampler | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """GET the metrics and parse them with prometheus-client's own parser."""
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


@pytest.fixture
async def metrics_port() -> AsyncIterator[tuple[CollectorRegistry, str]]:
    """One registry for the client and the receiver, served on a port of its own."""
    registry = CollectorRegistry()
    server = TestServer(metrics_app(registry), host="127.0.0.1")
    await server.start_server()
    yield registry, str(server.make_url("/metrics"))
    await server.close()


async def test_a_photo_from_upload_to_process_completed(
    sandbox: Sandbox,
    metrics_port: tuple[CollectorRegistry, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    registry, metrics_url = metrics_port
    provider, exporter = tracing()
    waiters = Registry()
    receiver = WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=TokenVerifier(TOKEN),
        registry=waiters,
        poll_interval=0.05,
        telemetry=ReceiverTelemetry(metrics=registry, tracing=provider),
    )
    handled: list[ProcessCompleted] = []

    @receiver.on_completed()
    async def publish(event: ProcessCompleted) -> None:
        handled.append(event)

    telemetry = ClientTelemetry(metrics=registry, tracing=provider)
    # The access log as the docs set it up: the token in the hook's path is shown as ***.
    redacted = {"access_log_class": RedactingAccessLogger}
    async with (
        serve(receiver, server_options=redacted) as http,
        sandbox.client(telemetry=telemetry) as client,
    ):
        sandbox.register_webhook(str(http.make_url(HOOK)))
        process = await client.run(
            ToolSlug.DAY_TO_DUSK, jpeg(), timeout=30, registry=waiters, webhook_grace=30
        )
        await sandbox.wait_idle()
        await idle(receiver)
        found = await scrape(metrics_url)
    assert process.status == ProcessStatus.DONE
    assert [event.process_id for event in handled] == [process.id]

    # Metrics: the client's and the receiver's, from one scrape.
    assert ({"outcome": "accepted", "reason": ""}, 1.0) in found["webhooks_deliveries_total"]
    assert ({"outcome": "processed"}, 1.0) in found["webhooks_entries_total"]
    assert found["webhooks_ack_latency_seconds_count"] == [({}, 1.0)]
    handler_runs = found["webhooks_handler_duration_seconds_count"]
    assert handler_runs == [({"handler": publish.__qualname__, "outcome": "ok"}, 1.0)]
    assert found["webhooks_in_flight"] == [({}, 0.0)]  # this receiver's own
    assert "webhooks_inbox_depth" in found  # the shared inbox's, read from the store
    assert found["webhooks_registry_waiters"] == [({}, 0.0)]
    created = {"method": "POST", "endpoint": "/v3/process", "status": "201"}
    assert (created, 1.0) in found["asyncsdk_client_requests_total"]

    # Traces: the run from upload to completion, and the delivery and handler of its process.
    spans = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (run,) = by_name["asyncsdk.run"]
    assert attributes(run)[PROCESS_ID_ATTRIBUTE] == process.id
    assert run.context is not None
    uploads = by_name["POST /v3/order"]
    assert [span.parent.span_id for span in uploads if span.parent] == [run.context.span_id]
    (delivery,) = by_name["webhooks.delivery"]
    assert attributes(delivery)[PROCESS_ID_ATTRIBUTE] == process.id
    assert attributes(delivery)["http.response.status_code"] == 200
    assert attributes(delivery)["webhooks.event_id"] == f"process.completed:{process.id}:done"
    (dispatch,) = by_name["webhooks.dispatch"]
    (handler,) = by_name["webhooks.handler"]
    assert dispatch.context is not None
    assert handler.parent is not None
    assert handler.parent.span_id == dispatch.context.span_id
    assert attributes(handler)["webhooks.handler"] == publish.__qualname__
    assert run.start_time is not None
    assert delivery.start_time is not None
    assert run.start_time < delivery.start_time
    every_attribute = repr([attributes(span) for span in spans])
    assert sandbox.api_key not in every_attribute
    assert TOKEN not in every_attribute

    # Logs: what happened, one line each, with the ids as fields and neither secret anywhere.
    about = [r for r in caplog.records if getattr(r, "process_id", None) == process.id]
    assert {r.getMessage() for r in about} >= {
        f"webhook for process {process.id} (done) is stored",
        f"webhook for process {process.id} (done) handled",
    }
    assert all(r.event_id == f"process.completed:{process.id}:done" for r in about)  # type: ignore[attr-defined]
    assert all("\n" not in r.getMessage() for r in caplog.records)
    everything = caplog.text + repr([vars(r) for r in caplog.records])
    assert sandbox.api_key not in everything
    assert TOKEN not in everything


async def test_a_failing_handler_is_an_error_span_and_an_error_duration() -> None:
    provider, exporter = tracing()
    telemetry = ReceiverTelemetry(metrics=True, tracing=provider)
    receiver = WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        retry_base=0.01,
        telemetry=telemetry,
    )
    calls = 0

    @receiver.on_completed()
    async def flaky(event: ProcessCompleted) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the downstream store is down")

    async with serve(receiver) as http:
        answer = await http.post(HOOK, data=encode(payload("p-9")), headers=JSON)
        assert answer.status == 200
        for _ in range(200):
            if calls >= 2:
                break
            await asyncio.sleep(0.02)
        await idle(receiver)
    handlers = [span for span in exporter.get_finished_spans() if span.name == "webhooks.handler"]
    assert [attributes(span).get("error.type") for span in handlers] == ["RuntimeError", None]
    assert telemetry.registry is not None
    runs = {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(
            (await _exposition(telemetry.registry)).decode()
        )
        for sample in family.samples
        if sample.name == "webhooks_handler_duration_seconds_count"
    }
    assert runs == {"error": 1.0, "ok": 1.0}


class NotTheReceivers(Sampler):
    """A user's sampler: every trace but those the receiver starts."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if name.startswith("webhooks."):
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "NotTheReceivers"


@contextlib.asynccontextmanager
async def downstream() -> AsyncIterator[tuple[str, list[str]]]:
    """A service the handlers call, on 127.0.0.1: its URL and the traceparent headers it got."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("traceparent", ""))
        return web.Response(text="stored")

    app = web.Application()
    app.router.add_post("/store", record)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/store")), seen
    finally:
        await server.close()


async def handled_with_calls_downstream(provider: TracerProvider, url: str, handlers: int) -> None:
    """One delivery to a receiver traced by ``provider`` whose ``handlers`` handlers each start a
    span of their own and call ``url`` with the trace context in the headers."""
    receiver = WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        telemetry=ReceiverTelemetry(tracing=provider),
    )
    tracer = provider.get_tracer("app")

    async def store(event: ProcessCompleted) -> None:
        with tracer.start_as_current_span("store the result"):
            headers: dict[str, str] = {}
            propagate.inject(headers)
            async with aiohttp.ClientSession() as http, http.post(url, headers=headers) as answer:
                assert answer.status == 200

    for _ in range(handlers):
        receiver.on_completed()(store)
    async with serve(receiver) as http:
        answer = await http.post(HOOK, data=encode(payload("p-3")), headers=JSON)
        assert answer.status == 200
        await idle(receiver)


async def test_a_trace_the_sampler_drops_reaches_no_exporter_and_goes_on_downstream_unsampled() -> (
    None
):
    provider, exporter = tracing(ParentBased(root=NotTheReceivers()))
    async with downstream() as (url, seen):
        await handled_with_calls_downstream(provider, url, handlers=2)
    # The handlers' own spans follow the dispatch the sampler dropped: nothing is exported, and
    # the service they call is told the trace is not sampled, one trace for both.
    assert exporter.get_finished_spans() == ()
    assert len(seen) == 2
    versions, trace_ids, _, flags = zip(*(header.split("-") for header in seen), strict=True)
    assert set(versions) == {"00"}
    assert not any(int(flag, 16) & 1 for flag in flags), "the sampled bit is off"
    assert len(set(trace_ids)) == 1
    assert trace_ids[0] != "0" * 32


async def test_a_recorded_dispatch_has_every_attribute_and_its_trace_goes_downstream() -> None:
    provider, exporter = tracing()
    async with downstream() as (url, seen):
        await handled_with_calls_downstream(provider, url, handlers=1)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    dispatch = spans["webhooks.dispatch"]
    (entry_id,) = {attributes(dispatch)["webhooks.entry_id"]}
    assert attributes(dispatch) == {
        PROCESS_ID_ATTRIBUTE: "p-3",
        "webhooks.event_id": "process.completed:p-3:done",
        "webhooks.entry_id": entry_id,
        "webhooks.attempt": 1,
    }
    assert attributes(spans["webhooks.delivery"]) == {
        "http.request.method": "POST",
        PROCESS_ID_ATTRIBUTE: "p-3",
        "webhooks.event_id": "process.completed:p-3:done",
        "http.response.status_code": 200,
    }
    mine = spans["store the result"]
    assert dispatch.context is not None
    assert mine.context is not None
    assert mine.parent is not None
    assert mine.parent.span_id == dispatch.context.span_id
    ((sent, flags),) = [header.rsplit("-", 1) for header in seen]
    assert sent == f"00-{dispatch.context.trace_id:032x}-{mine.context.span_id:016x}"
    assert int(flags, 16) & 1, "the sampled bit is on"


async def _exposition(registry: CollectorRegistry) -> bytes:
    server = TestServer(metrics_app(registry, token="t" * 20), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:
            url = server.make_url("/metrics")
            async with http.get(url) as refused:
                assert refused.status == 401
            async with http.get(url, headers={"Authorization": "Bearer " + "t" * 20}) as ok:
                return await ok.read()
    finally:
        await server.close()


def test_receivers_in_one_process_keep_their_metrics_apart() -> None:
    first = ReceiverTelemetry(metrics=True)
    second = ReceiverTelemetry(metrics=True)
    for telemetry in (first, second):
        WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), telemetry=telemetry)
    assert first.registry is not second.registry
    with pytest.raises(ConfigurationError, match="one per receiver"):
        WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), telemetry=first)
    shared = ReceiverTelemetry(metrics=first.registry)
    with pytest.raises(ConfigurationError, match="CollectorRegistry of its own"):
        WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), telemetry=shared)


class StatsDown(MemoryInbox):
    """A memory inbox whose ``stats()`` fails once ``down`` is set, as a store out of reach."""

    down = False

    async def stats(self) -> InboxStats:
        if self.down:
            raise InboxUnavailableError("the store does not answer")
        return await super().stats()


async def test_the_shared_inbox_gauges_come_from_the_store_and_go_when_it_is_out_of_reach() -> None:
    inbox = StatsDown()
    for pid in ("p-1", "p-2", "p-3"):
        assert await inbox.put(event(pid), b"{}")
    telemetry = ReceiverTelemetry(metrics=True)
    receiver = WebhookReceiver(inbox=inbox, verifier=TokenVerifier(TOKEN), telemetry=telemetry)
    release = asyncio.Event()

    @receiver.on_completed()
    async def held(_: ProcessCompleted) -> None:
        await release.wait()

    assert telemetry.registry is not None
    registry = telemetry.registry

    async def samples() -> dict[str, float]:
        text = (await _exposition(registry)).decode()
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if not sample.labels
        }

    async with serve(receiver):

        async def read() -> bool:
            found = await samples()
            return found.get("webhooks_inbox_depth") == 3.0

        await eventually(read, "the depth read from the store", limit=10, step=0.1)
        found = await samples()
        assert found["webhooks_inbox_dead_letters"] == 0.0
        assert found["webhooks_inbox_replays_total"] == 0.0
        assert found["webhooks_inbox_oldest_age_seconds"] >= 0.0

        inbox.down = True  # three reads (6 s) without an answer: no figure rather than a stale one

        async def dropped() -> bool:
            return "webhooks_inbox_depth" not in await samples()

        await eventually(dropped, "the stale depth to be dropped", limit=15, step=0.2)
        assert "webhooks_in_flight" in await samples()  # this node's own figures stay
        inbox.down = False
        await eventually(read, "the depth read again", limit=10, step=0.1)
        release.set()


class CancelNotPassedOn(MemoryInbox):
    """An inbox whose ``stats()`` answers a cancellation with an error of its own, or swallows
    it and answers, as some drivers do (and as ``asyncio.timeout`` on Python 3.11 can when its
    deadline and the cancel meet): the receiver's stop must not wait on it."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer
        self.reading = asyncio.Event()

    async def stats(self) -> InboxStats:
        self.reading.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if self.answer == "an error":
                raise InboxUnavailableError("the connection was lost") from None
        return await super().stats()


@pytest.mark.parametrize("answer", ["an error", "the figures"])
async def test_stop_returns_while_the_store_read_for_metrics_does_not_pass_its_cancel_on(
    answer: str,
) -> None:
    inbox = CancelNotPassedOn(answer)
    receiver = WebhookReceiver(
        inbox=inbox,
        verifier=TokenVerifier(TOKEN),
        telemetry=ReceiverTelemetry(metrics=CollectorRegistry()),
    )
    await receiver.start()
    await asyncio.wait_for(inbox.reading.wait(), 10)  # the figures' read is under way
    async with asyncio.timeout(10):  # a guard: stop() used to wait forever
        await receiver.stop()
