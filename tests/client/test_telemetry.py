"""The client's Prometheus metrics and OpenTelemetry spans, read back as a dashboard or a trace
viewer would: the exposition parsed by prometheus-client's own parser, spans from the SDK's
in-memory exporter."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    TraceState,
)
from opentelemetry.util.types import Attributes
from PIL import Image
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from asyncsdk import (
    PROCESS_ID_ATTRIBUTE,
    Client,
    ClientTelemetry,
    ConfigurationError,
    GenerationLimit,
    NotFoundError,
    ProcessStatus,
    ToolSlug,
)
from asyncsdk.sandbox import Sandbox

from ._fake import API_KEY, FakeService, Reply, process_json
from .conftest import MakeClient


def samples(telemetry: ClientTelemetry) -> list[tuple[str, dict[str, str], float]]:
    assert telemetry.registry is not None
    text = generate_latest(telemetry.registry).decode()
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def tracing(sampler: Sampler | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_requests_and_retries_are_counted_by_route_template(
    fake: FakeService, make_client: MakeClient
) -> None:
    telemetry = ClientTelemetry(metrics=True)
    client = make_client(telemetry=telemetry)
    fake.script(
        "GET", "/v3/process/pr-42", Reply(status=503), Reply(json=process_json("pr-42", "done"))
    )
    await client.processes.get("pr-42")

    found = samples(telemetry)
    route = {"method": "GET", "endpoint": "/v3/process/{process_id}"}
    assert ("asyncsdk_client_requests_total", {**route, "status": "503"}, 1.0) in found
    assert ("asyncsdk_client_requests_total", {**route, "status": "200"}, 1.0) in found
    assert ("asyncsdk_client_retries_total", {**route, "reason": "503"}, 1.0) in found
    assert ("asyncsdk_client_request_duration_seconds_count", route, 2.0) in found
    assert not [s for s in found if "pr-42" in str(s[1])], "no raw id becomes a label"


async def test_an_id_holding_a_slash_stays_one_id_and_adds_no_endpoint(
    fake: FakeService, make_client: MakeClient
) -> None:
    # Fetch-back asks about whatever id a delivery names: a slash in it (sent as %2F) must not
    # turn the rest of the id into a route, or every such id would add a series.
    provider, exporter = tracing()
    telemetry = ClientTelemetry(metrics=True, tracing=provider)
    client = make_client(telemetry=telemetry)
    for process_id in ("x/1", "x/2", "x/3/y"):
        with pytest.raises(NotFoundError):
            await client.processes.get(process_id)

    endpoints = {labels["endpoint"] for _, labels, _ in samples(telemetry) if "endpoint" in labels}
    assert endpoints == {"/v3/process/{process_id}"}
    spans = exporter.get_finished_spans()
    assert [attributes(span)[PROCESS_ID_ATTRIBUTE] for span in spans] == ["x/1", "x/2", "x/3/y"]
    assert {span.name for span in spans} == {"GET /v3/process/{process_id}"}


async def test_an_id_spelled_like_a_word_of_the_paths_is_still_the_id(
    fake: FakeService, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    # "order" is a word of the service's paths (/v1/order/image); as a process id it is an id
    # all the same: one endpoint label for every series, and the id on the span and the logs.
    caplog.set_level(logging.DEBUG, logger="asyncsdk")
    provider, exporter = tracing()
    telemetry = ClientTelemetry(metrics=True, tracing=provider)
    client = make_client(telemetry=telemetry)
    fake.script(
        "GET", "/v3/process/order", Reply(status=503), Reply(json=process_json("order", "done"))
    )
    await client.processes.get("order")

    endpoints = {labels["endpoint"] for _, labels, _ in samples(telemetry) if "endpoint" in labels}
    assert endpoints == {"/v3/process/{process_id}"}
    assert [attributes(span)[PROCESS_ID_ATTRIBUTE] for span in exporter.get_finished_spans()] == [
        "order",
        "order",
    ]
    assert {getattr(r, "process_id", None) for r in caplog.records if r.name == "asyncsdk"} == {
        "order"
    }


async def test_each_attempt_is_a_client_span_without_secrets(
    fake: FakeService, make_client: MakeClient
) -> None:
    provider, exporter = tracing()
    client = make_client(telemetry=ClientTelemetry(tracing=provider))
    fake.script(
        "GET", "/v3/process/pr-7", Reply(status=429), Reply(json=process_json("pr-7", "done"))
    )
    await client.processes.get("pr-7")

    first, second = exporter.get_finished_spans()
    assert first.name == second.name == "GET /v3/process/{process_id}"
    assert attributes(first) == {
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
        "server.port": fake.url.port,
        "url.full": f"http://127.0.0.1:{fake.url.port}/v3/process/pr-7",
        "url.template": "/v3/process/{process_id}",
        PROCESS_ID_ATTRIBUTE: "pr-7",
        "http.response.status_code": 429,
        "error.type": "429",
    }
    assert attributes(second)["http.request.resend_count"] == 1
    assert attributes(second)["http.response.status_code"] == 200
    assert "error.type" not in attributes(second)
    assert API_KEY not in repr([attributes(span) for span in (first, second)])


class OnlyCreations(Sampler):
    """A sampler of the user's that keeps the attempts creating a process, deciding on what a
    span is started with: its method and route template."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

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
        given = dict(attributes or {})
        self.seen.append(given)
        keep = (given.get("http.request.method"), given.get("url.template")) == (
            "POST",
            "/v3/process",
        )
        if keep:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "OnlyCreations"


async def test_a_sampler_decides_on_the_route_and_a_dropped_attempt_reaches_no_exporter(
    fake: FakeService, make_client: MakeClient
) -> None:
    sampler = OnlyCreations()
    provider, exporter = tracing(sampler)
    client = make_client(telemetry=ClientTelemetry(tracing=provider))
    fake.script("GET", "/v3/process/pr-7", Reply(json=process_json("pr-7", "done")))
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["pr-8"]}))

    process = await client.processes.get("pr-7")
    assert process.id == "pr-7"
    assert exporter.get_finished_spans() == ()

    await client.processes.create("o1", ToolSlug.DAY_TO_DUSK, inputs="as1", validate=False)
    (created,) = exporter.get_finished_spans()
    assert attributes(created) == {
        "http.request.method": "POST",
        "server.address": "127.0.0.1",
        "server.port": fake.url.port,
        "url.full": f"http://127.0.0.1:{fake.url.port}/v3/process",
        "url.template": "/v3/process",
        "http.response.status_code": 201,
    }
    assert [seen.get("url.template") for seen in sampler.seen] == [
        "/v3/process/{process_id}",
        "/v3/process",
    ]


async def test_an_attempt_follows_the_sampling_decision_of_the_callers_span(
    fake: FakeService, make_client: MakeClient
) -> None:
    provider, exporter = tracing(ParentBased(root=OnlyCreations()))  # a GET is never a root kept
    client = make_client(telemetry=ClientTelemetry(tracing=provider))
    fake.script("GET", "/v3/process/pr-7", Reply(json=process_json("pr-7", "done")))
    # A caller's trace, as a traceparent header brought it: sampled, then not sampled.
    sampled, dropped = (
        NonRecordingSpan(SpanContext(0xA1, 0xB2, is_remote=True, trace_flags=TraceFlags(flags)))
        for flags in (TraceFlags.SAMPLED, TraceFlags.DEFAULT)
    )
    with trace.use_span(dropped):
        await client.processes.get("pr-7")
    assert exporter.get_finished_spans() == ()
    with trace.use_span(sampled):
        await client.processes.get("pr-7")
    (span,) = exporter.get_finished_spans()
    assert span.context is not None
    assert span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (0xA1, 0xB2)
    assert attributes(span)[PROCESS_ID_ATTRIBUTE] == "pr-7"
    assert attributes(span)["url.full"].endswith("/v3/process/pr-7")


async def test_a_connection_failure_is_a_span_with_its_error_type(
    make_client: MakeClient, free_port: int
) -> None:
    provider, exporter = tracing()
    client = make_client(
        base_url=f"http://127.0.0.1:{free_port}", telemetry=ClientTelemetry(tracing=provider)
    )
    with pytest.raises(Exception, match="could not connect"):
        await client.processes.get("pr-1")
    spans = exporter.get_finished_spans()
    assert spans, "every attempt, failed or not, is a span"
    assert all(attributes(span)["error.type"] == "ClientConnectorError" for span in spans)
    assert all("http.response.status_code" not in attributes(span) for span in spans)


async def test_the_wait_for_a_generation_slot_is_measured(
    fake: FakeService, make_client: MakeClient
) -> None:
    telemetry = ClientTelemetry(metrics=True)
    client = make_client(
        telemetry=telemetry, generation_limit=GenerationLimit(max_calls=1, period=0.3)
    )
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["a"]}))
    await asyncio.gather(
        client.processes.create("o1", ToolSlug.DAY_TO_DUSK, inputs="as1", validate=False),
        client.processes.create("o1", ToolSlug.DAY_TO_DUSK, inputs="as1", validate=False),
    )
    found = {name: value for name, _, value in samples(telemetry)}
    assert found["asyncsdk_client_generation_wait_seconds_count"] == 2
    assert found["asyncsdk_client_generation_wait_seconds_sum"] >= 0.25


async def test_a_run_is_one_trace_from_upload_to_completion(sandbox: Sandbox) -> None:
    provider, exporter = tracing()
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 140, 160)).save(buffer, "JPEG")
    async with sandbox.client(telemetry=ClientTelemetry(tracing=provider)) as client:
        process = await client.run(ToolSlug.DAY_TO_DUSK, buffer.getvalue(), timeout=30)
    assert process.status == ProcessStatus.DONE

    spans = exporter.get_finished_spans()
    (run,) = [span for span in spans if span.name == "asyncsdk.run"]
    assert attributes(run)[PROCESS_ID_ATTRIBUTE] == process.id
    assert [event.name for event in run.events] == ["process.completed"]
    children = [span.name for span in spans if span.parent is not None]
    assert run.context is not None
    assert all(
        span.parent.span_id == run.context.span_id for span in spans if span.parent is not None
    )
    assert "POST /v3/order" in children
    assert "POST /v3/process" in children
    assert "GET /v3/process/{process_id}" in children


async def test_clients_with_their_own_telemetry_live_side_by_side(
    fake: FakeService, make_client: MakeClient
) -> None:
    first, second = ClientTelemetry(metrics=True), ClientTelemetry(metrics=True)
    fake.script("GET", "/v3/process/x", Reply(json=process_json("x", "done")))
    await make_client(telemetry=first).processes.get("x")
    await make_client(telemetry=second).processes.get("x")
    await make_client(telemetry=second).processes.get("x")
    count = "asyncsdk_client_request_duration_seconds_count"
    assert [value for name, _, value in samples(first) if name == count] == [1.0]
    assert [value for name, _, value in samples(second) if name == count] == [2.0]


async def test_log_records_of_a_request_carry_its_process_id(
    fake: FakeService, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncsdk")
    fake.script("GET", "/v3/process/pr-5", Reply(status=503), Reply(json=process_json("pr-5")))
    await client.processes.get("pr-5")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "asyncsdk"]
    assert [level for level, _ in lines] == ["DEBUG", "INFO", "DEBUG"]  # attempt, retry, attempt
    assert all(getattr(r, "process_id", None) == "pr-5" for r in caplog.records)
    assert API_KEY not in caplog.text + repr([vars(r) for r in caplog.records])


def test_a_wrong_setting_names_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="CollectorRegistry"):
        ClientTelemetry(metrics="yes")
    with pytest.raises(ConfigurationError, match="TracerProvider"):
        ClientTelemetry(tracing=object())
