"""The metrics route: counts and ack latency for its scrapers only, and off without a token."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from whtools import HOOK, JSON, TOKEN, encode, idle, make_receiver, payload, serve

from asyncsdk import ConfigurationError

METRICS_TOKEN = "scrape-" + "m" * 24
SCRAPER = {"Authorization": f"Bearer {METRICS_TOKEN}"}


async def test_metrics_route_serves_counts_and_ack_latency_to_its_scrapers_only() -> None:
    receiver = make_receiver(metrics_route=True, metrics_token=METRICS_TOKEN)
    async with serve(receiver) as client:
        await client.post(HOOK, data=encode(payload()), headers=JSON)
        await client.post(HOOK, data=encode(payload()), headers=JSON)
        await client.post(HOOK, data=b"{", headers=JSON)
        await idle(receiver)
        assert (await client.get("/hooks/metrics")).status == 401
        wrong = await client.get("/hooks/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert wrong.status == 401
        response = await client.get("/hooks/metrics", headers=SCRAPER)
        assert response.status == 200
        families = {
            family.name: family for family in text_string_to_metric_families(await response.text())
        }
    deliveries = {
        (s.labels["outcome"], s.labels["reason"]): s.value
        for s in families["webhooks_deliveries"].samples
    }
    assert deliveries == {("accepted", ""): 1, ("duplicate", ""): 1, ("rejected", "bad_json"): 1}
    entries = {s.labels["outcome"]: s.value for s in families["webhooks_entries"].samples}
    assert entries["processed"] == 1
    latency = {s.name: s.value for s in families["webhooks_ack_latency_seconds"].samples}
    assert latency["webhooks_ack_latency_seconds_count"] == 2
    assert latency["webhooks_ack_latency_seconds_sum"] > 0


def test_the_metrics_route_stays_off_unless_it_has_a_token() -> None:
    with pytest.raises(ConfigurationError, match="metrics_token"):
        make_receiver(metrics_route=True)
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        make_receiver(metrics_route=True, metrics_token="short")
    receiver = make_receiver()
    assert not [r for r in receiver.app.router.resources() if "metrics" in r.canonical]
