"""A small run of ``python -m benchmarks.soak``: 2,000 deliveries (30 % duplicates, 5 % malformed)
through three receiver processes on one Redis, one of them SIGKILLed and replaced mid-run.

Nothing is lost, no duplicate or malformed delivery reaches a handler, and every valid event's
effect (written with ``atomic=True``, applied with the ack) lands exactly once.  An entry the killed
process had started and not acknowledged runs once more elsewhere, and there can be no more of them
than the killed process had workers; the killed run's writes were never applied.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 2000


async def test_small_soak_loses_nothing(redis_url: str, redis_prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.soak",
        "--events",
        str(EVENTS),
        "--redis",
        redis_url,
        "--prefix",
        redis_prefix,
        "--claim-timeout",
        "3",
        "--no-report",
        "--json",
        str(out),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(180):  # a guard against a hang, not a speed requirement
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, (stdout + stderr).decode()[-4000:]
    result = json.loads(out.read_text())

    new, duplicates, malformed = (
        result["new_valid_events"],
        result["duplicates_sent"],
        result["malformed_sent"],
    )
    assert new + duplicates + malformed == EVENTS
    assert duplicates == EVENTS * 30 // 100
    assert malformed == EVENTS * 5 // 100
    assert set(result["timeline_s"]) >= {"killed_at", "restarted_at"}  # the kill did happen

    # Every valid delivery was acknowledged; every malformed one refused.
    assert result["gave_up"] == 0
    assert result["valid_rejected"] == 0
    assert result["answers"].get("accepted", 0) + result["answers"].get("duplicate", 0) == (
        new + duplicates
    )
    assert result["malformed_rejected"] == malformed
    assert result["malformed_accepted"] == 0

    # Nothing lost; every effect exactly once (atomic writes), though the killed process's
    # unacknowledged entries run a second time elsewhere.
    assert result["lost"] == 0
    calls = {int(k): v for k, v in result["handler_calls_per_valid_event"].items()}
    assert calls == {1: new}
    assert result["repeated_calls"] == 0
    runs = {int(k): v for k, v in result["handler_runs_per_valid_event"].items()}
    reruns = result["rerun_after_kill"]
    assert runs == ({1: new - reruns, 2: reruns} if reruns else {1: new})
    assert reruns <= result["workers_per_receiver"]
    assert result["rerun_otherwise"] == 0
    assert result["malformed_handled"] == 0
    assert result["unknown_handled"] == 0
    assert result["dead_letters"] == 0
    assert result["waiters_unresolved_of_200"] == 0
    assert result["receiver_tracebacks"] == 0
