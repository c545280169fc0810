"""A receiver served by uvicorn (the ASGI adapter), killed with SIGKILL right after acking,
loses nothing once restarted, and runs each handler's effect once."""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp
from whtools import JSON, crash_test_receiver, encode, eventually, payload, recorded

SCRIPT = Path(__file__).with_name("asgi_receiver_script.py")


async def test_sigkill_under_uvicorn_after_the_ack_loses_nothing(tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as session:
        async with crash_test_receiver(SCRIPT, tmp_path, "first", "block") as (proc, url):
            for pid in ("p-1", "p-2", "p-3"):
                async with session.post(url, data=encode(payload(pid)), headers=JSON) as response:
                    assert response.status == 200
                    assert await response.json() == {"status": "accepted"}
            proc.send_signal(signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL
        assert recorded(tmp_path) == []

        async with crash_test_receiver(SCRIPT, tmp_path, "second", "record") as (proc, url):

            async def all_recorded() -> bool:
                return sorted(recorded(tmp_path)) == ["p-1 done", "p-2 done", "p-3 done"]

            await eventually(all_recorded, "the restarted receiver to handle all three", limit=30)
            async with session.post(url, data=encode(payload("p-1")), headers=JSON) as response:
                assert await response.json() == {"status": "duplicate"}
            proc.send_signal(signal.SIGTERM)
            # uvicorn shuts down gracefully, then raises the signal it caught again.
            assert await proc.wait() == -signal.SIGTERM
    # Each effect once: nothing lost, nothing run twice.
    assert sorted(recorded(tmp_path)) == ["p-1 done", "p-2 done", "p-3 done"]
