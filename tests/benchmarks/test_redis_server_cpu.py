"""``python -m benchmarks.redis_server_cpu`` reads what a delivery costs a Redis server of its own:
the hand-written peer stores each event in one call (``EVALSHA``, which runs ``SET`` and
``XADD``), and the receiver's figures include its workers' claims and acks.

It is the benchmarks' own code, not the package's: there is no public name to test it through,
hence the private import of ``measure``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchmarks.redis_server_cpu import measure


@pytest.fixture
def redis_server() -> None:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true requires redis-server")
        pytest.skip("redis-server is not installed")


@pytest.mark.usefixtures("redis_server")
def test_the_peer_makes_one_call_per_delivery(tmp_path: Path) -> None:
    found = measure("redis-peer", 300, tmp_path)
    assert found["calls:evalsha"] == 1.0  # one round trip per delivery
    assert found["calls:set"] == found["calls:xadd"] == 1.0  # the script's own commands
    assert found["cpu_us"] > 0


@pytest.mark.usefixtures("redis_server")
def test_the_receivers_figures_hold_its_workers_claims_and_acks(tmp_path: Path) -> None:
    found = measure("redis", 300, tmp_path)
    assert found["calls"] > 3  # put, claim and ack at least, per delivery
    assert found["usec"] > 0
