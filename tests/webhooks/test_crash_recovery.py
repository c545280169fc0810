"""A receiver killed with SIGKILL right after acking loses nothing once restarted."""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp
from whtools import JSON, crash_test_receiver, encode, eventually, payload, recorded

SCRIPT = Path(__file__).with_name("receiver_script.py")


async def test_sigkill_after_the_ack_loses_nothing(tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        async with crash_test_receiver(SCRIPT, tmp_path, "first", "block") as (proc, url):
            for pid in ("p-1", "p-2"):
                async with session.post(url, data=encode(payload(pid)), headers=JSON) as response:
                    assert response.status == 200
                    assert await response.json() == {"status": "accepted"}
            proc.send_signal(signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL
        assert recorded(tmp_path) == []

        async with crash_test_receiver(SCRIPT, tmp_path, "second", "record") as (proc, url):

            async def both_recorded() -> bool:
                return recorded(tmp_path) == ["p-1 done", "p-2 done"]

            await eventually(both_recorded, "the restarted receiver to handle both", limit=30)
            # The dedup keys survived the crash too.
            async with session.post(url, data=encode(payload("p-1")), headers=JSON) as response:
                assert await response.json() == {"status": "duplicate"}
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
    assert recorded(tmp_path) == ["p-1 done", "p-2 done"]
