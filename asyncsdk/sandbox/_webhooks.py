"""Delivery of ``process.completed`` to the registered URLs: at least once, with retries.

Each attempt is a POST with a 10 s (``webhook_timeout``) limit; a non-2xx answer, a timeout or a
connection error is retried after ``webhook_retry_base * 2 ** (attempt - 1)`` seconds, up to
``webhook_max_attempts`` attempts.  ``webhook_duplicates`` (and, with probability
``webhook_duplicate_rate``, one more) extra copies of each event are delivered; with
``webhook_out_of_order`` each copy waits a random time up to ``webhook_max_jitter`` first.  The
result URLs carry a fresh ``token`` on every attempt, as the live service regenerates them.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

import aiohttp

from asyncsdk.sandbox._config import SandboxConfig
from asyncsdk.sandbox._stats import Delivery

__all__ = ["deliver"]


async def deliver(
    session: aiohttp.ClientSession,
    config: SandboxConfig,
    record: Delivery,
    payload: Callable[[str], dict[str, Any]],
    jitter: float,
) -> None:
    """Deliver one copy of an event to ``record.url``; ``payload(token)`` builds each attempt."""
    if jitter > 0:
        await asyncio.sleep(jitter)
    max_attempts = max(1, config.webhook_max_attempts)
    for attempt in range(1, max_attempts + 1):
        record.attempts = attempt
        try:
            async with session.post(
                record.url,
                json=payload(secrets.token_hex(8)),
                timeout=aiohttp.ClientTimeout(total=config.webhook_timeout),
                headers={"User-Agent": "asyncsdk-sandbox/webhooks"},
            ) as response:
                await response.read()
                record.response_statuses.append(response.status)
                if 200 <= response.status < 300:
                    record.delivered = True
                    record.error = ""
                    return
                record.error = f"HTTP {response.status}"
        except TimeoutError:
            record.response_statuses.append(None)
            record.error = f"no answer within {config.webhook_timeout} s"
        except aiohttp.ClientError as exc:
            record.response_statuses.append(None)
            record.error = f"{type(exc).__name__}: {exc}"
        if attempt < max_attempts:
            await asyncio.sleep(config.webhook_retry_base * 2 ** (attempt - 1))
