"""The example of docs/observability.md: the receiver's metrics route answers its scrapers only,
and one scrape of the shared registry holds the receiver's and the client's metrics."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer
from codeblocks import ROOT, run_block
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from asyncsdk import ProcessStatus, ToolSlug, samples
from asyncsdk.sandbox import Sandbox

PAGE = ROOT / "docs" / "observability.md"
TOKEN = "observe-" + "h00k" * 6
METRICS_TOKEN = "scrape-" + "m3tr1c" * 4


async def test_the_observed_receiver_and_client_share_one_scrape(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    page = run_block(PAGE, "observability")
    registry = CollectorRegistry()
    app = page["observed_app"](TOKEN, METRICS_TOKEN, registry, str(tmp_path / "hooks.sqlite3"))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        sandbox.register_webhook(str(server.make_url(f"/hooks/{TOKEN}")))
        client = page["observed_client"](
            registry, api_key=sandbox.api_key, base_url=sandbox.base_url, app_url=sandbox.app_url
        )
        async with client:
            process = await client.run(ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
        assert process.status == ProcessStatus.DONE
        await sandbox.wait_idle()
        async with aiohttp.ClientSession() as http:
            url = server.make_url("/hooks/metrics")
            async with http.get(url) as refused:
                assert refused.status == 401
            scraper = {"Authorization": f"Bearer {METRICS_TOKEN}"}
            async with http.get(url, headers=scraper) as response:
                assert response.status == 200
                text = await response.text()
    finally:
        await server.close()
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"webhooks_deliveries", "asyncsdk_client_requests"} <= names
