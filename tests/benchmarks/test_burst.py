"""The burst's sender counts what the goal is judged on: every answer by status, a 503 without
``Retry-After``, and the deliveries sent again after a 503 until accepted; and the burst fills a
real receiver's inbox past its ``queue_limit``, so that its 503s and their recovery are measured.

The sender is the benchmarks' own code (``benchmarks._burst``), not the package's: there is no
public name to test it through, hence the private import.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from benchmarks._burst import QUEUE_SHARE, _once, send
from benchmarks._plan import make_plan


async def test_503s_are_sent_again_after_their_retry_after_and_counted() -> None:
    attempts: Counter[str] = Counter()

    async def hook(request: web.Request) -> web.Response:
        process_id = json.loads(await request.read())["process_id"]
        attempts[process_id] += 1
        number = int(process_id.rsplit("-", 1)[1])
        if attempts[process_id] == 1 and number % 2 == 0:
            return web.Response(status=503, headers={"Retry-After": "1"})
        if attempts[process_id] == 1 and number == 7:
            return web.Response(status=503)  # no Retry-After: counted against the goal
        if number == 9:
            return web.Response(status=400)  # never accepted
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/hooks", hook)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        result = await send(
            None,
            url=str(server.make_url("/hooks")),
            deliveries=12,
            connections=4,
            run="t",
            resends=2,
        )
    finally:
        await server.close()

    assert set(attempts) == {f"t-{n}" for n in range(12)}
    assert result["unavailable"] == 7  # six even ids and id 7, once each
    assert result["no_retry_after"] == 1
    assert result["other"] == 3  # id 9's 400, on the first try and on each of two resends
    assert result["never_accepted"] == 1
    assert result["ok"] == 11
    assert result["resent"] == 8 + 1  # 6 + 1 + 1 after the burst, then id 9 alone
    assert result["p99_s"] > 0


@pytest.mark.slow
def test_a_burst_past_the_queue_limit_is_answered_503_then_accepted_and_none_is_lost(
    tmp_path: Path,
) -> None:
    plan = attrs.evolve(make_plan(quick=True, runs=1), burst_deliveries=400)
    result = _once(plan, tmp_path, "memory", "limit")  # a queue_limit of 400 / QUEUE_SHARE
    assert QUEUE_SHARE > 1
    assert result["unavailable"] > 0, result  # the inbox filled: the 503 path was taken
    assert result["resent"] >= result["unavailable"]
    assert result["ok"] == 400  # every delivery accepted in the end
    assert result["never_accepted"] == result["lost"] == 0
    assert result["other"] == result["no_retry_after"] == result["errors"] == 0
    assert result["accepted_s"] >= 5  # at least one Retry-After (5 s) waited out
