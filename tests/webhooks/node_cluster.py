"""Receiver processes (``shared_node.py``) on one shared inbox, as a test starts and reads them:
their hook URLs, their metrics scraped over HTTP, and ``asyncsdk`` run on the command line."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import attrs
from node_process import start_node_process
from shared_node import METRICS_TOKEN

NODE_SCRIPT = Path(__file__).with_name("shared_node.py")
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "shared-" + "s7a11" * 6


@attrs.define
class Node:
    process: asyncio.subprocess.Process
    port: int

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{TOKEN}"


async def start_node(
    backend: str,
    url: str,
    where: str,
    name: str,
    runs: Path,
    *,
    claim_timeout: float,
    drain_timeout: float = 10.0,
    mode: str = "",
) -> Node:
    """One node on the inbox at ``url`` (prefix or schema ``where``); its runs go to ``runs``."""
    timeouts = (str(claim_timeout), str(drain_timeout))
    args = (backend, url, where, TOKEN, name, str(runs), *timeouts, mode)
    return Node(*await start_node_process(NODE_SCRIPT, *args, name=name))


async def stop_node(node: Node) -> None:
    """SIGTERM, as an orchestrator stops a node; a node still running 30 s later is killed and
    the test fails (a drain is bounded by ``drain_timeout``)."""
    if node.process.returncode is None:
        node.process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(30):
            await node.process.communicate()
    except TimeoutError:
        node.process.send_signal(signal.SIGUSR2)  # its tasks' stacks, on its stdout
        await asyncio.sleep(1)
        node.process.kill()
        out, _ = await node.process.communicate()
        stacks = out.decode(errors="replace")
        raise AssertionError(
            f"node on port {node.port} still ran 30 s after SIGTERM; its tasks:\n{stacks}"
        ) from None


async def scrape(node: Node) -> dict[str, float]:
    """The unlabelled samples of one node's Prometheus metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    url = f"http://127.0.0.1:{node.port}/hooks/metrics"
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        assert response.status == 200
        text = await response.text()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


async def cli(*args: str) -> str:
    """``asyncsdk ARGS`` run as an operator runs it; its output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asyncsdk",
        *args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    return out.decode()
