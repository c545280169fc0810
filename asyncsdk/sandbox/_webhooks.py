"""Delivery of ``process.completed`` to the registered URLs: at least once, with retries, each
attempt recorded and each failed one told on the ``asyncsdk.sandbox`` logger in one line.

Each attempt is a POST with a 10 s (``webhook_timeout``) limit; a non-2xx answer, a timeout or a
connection error is retried after ``webhook_retry_base * 2 ** (attempt - 1)`` seconds, up to
``webhook_max_attempts`` attempts.  ``webhook_duplicates`` (and, with probability
``webhook_duplicate_rate``, one more) extra copies of each event are delivered; with
``webhook_out_of_order`` each copy waits a random time up to ``webhook_max_jitter`` first.  The
result URLs carry a fresh ``token`` on every attempt, as the live service regenerates them.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

import aiohttp
from yarl import URL

from asyncsdk.sandbox._config import SandboxConfig
from asyncsdk.sandbox._masking import mask_text, mask_url
from asyncsdk.sandbox._records import iso, utc_now
from asyncsdk.sandbox._stats import Attempt, Delivery

__all__ = ["deliver", "failure_line"]

log = logging.getLogger("asyncsdk.sandbox")

#: How much of a receiver's answer is kept per attempt (shown on the page and in the log line).
ANSWER_LIMIT: Final = 2000
LINE_ANSWER_LIMIT: Final = 120


def failure_line(delivery: Delivery, attempt: Attempt, max_attempts: int) -> str:
    """The one line told of a failed attempt: what went wrong, where, and what happens next."""
    if attempt.status is not None:
        what = f"HTTP {attempt.status}"
        answer = " ".join(attempt.answer.split())
        if answer:
            cut = answer[:LINE_ANSWER_LIMIT] + ("..." if len(answer) > LINE_ANSWER_LIMIT else "")
            what += f" {cut}"
    else:
        what = attempt.error
    if attempt.retry_in is None:
        after = f"giving up after {attempt.number} attempt{'' if attempt.number == 1 else 's'}"
    else:
        at = (utc_now() + timedelta(seconds=attempt.retry_in)).strftime("%H:%M:%S")
        after = f"next try in {attempt.retry_in:g} s (at {at} UTC)"
    return (
        f"webhook delivery failed: {what} from {mask_url(delivery.url)} (process "
        f"{delivery.process_id}, attempt {attempt.number} of {max_attempts}); {after}"
    )


async def _post(
    session: aiohttp.ClientSession, config: SandboxConfig, url: str, body: dict[str, Any]
) -> tuple[int | None, str, str]:
    """One POST: (status, answer, error); status ``None`` when none came.  The texts are as
    they came, URLs in clear: :func:`deliver` masks them before anything shows them."""
    try:
        async with session.post(
            url,
            json=body,
            timeout=aiohttp.ClientTimeout(total=config.webhook_timeout),
            headers={"User-Agent": "asyncsdk-sandbox/webhooks"},
        ) as response:
            answer = await response.read()
            return response.status, answer.decode("utf-8", "replace"), ""
    except TimeoutError:
        return None, "", f"no answer within {config.webhook_timeout} s"
    except aiohttp.ClientSSLError as exc:  # before its base class ClientConnectorError
        parsed = URL(url)
        plain = parsed.with_scheme("http").with_port(parsed.port)
        return (
            None,
            "",
            f"no TLS answer ({exc.os_error}): if the receiver is plain http, write {plain}",
        )
    except aiohttp.ClientConnectorError as exc:
        where = f"{exc.host}:{exc.port}"
        if isinstance(exc.os_error, ConnectionRefusedError):
            return (
                None,
                "",
                f"connection refused: nothing listens on {where}; is the receiver running?",
            )
        return None, "", f"cannot connect to {where}: {exc.os_error.strerror or exc.os_error}"
    except aiohttp.TooManyRedirects as exc:  # before its base class ClientResponseError
        # Each URL once, in the order they were visited: the loop the receiver goes round.
        visited = dict.fromkeys(str(response.url) for response in exc.history)
        return None, "", f"no answer after {len(exc.history)} redirects: {' -> '.join(visited)}"
    except aiohttp.ClientResponseError as exc:
        # aiohttp's parser points at the fault over several lines: the failure line is one.
        return None, "", f"the receiver's answer is not valid HTTP: {' '.join(exc.message.split())}"
    except aiohttp.ClientError as exc:
        return None, "", f"{type(exc).__name__}: {exc}"


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
    loop = asyncio.get_running_loop()
    max_attempts = max(1, config.webhook_max_attempts)
    try:
        for number in range(1, max_attempts + 1):
            record.attempts = number
            at, started = iso(utc_now()), loop.time()
            status, answer, error = await _post(
                session, config, record.url, payload(secrets.token_hex(8))
            )
            # Every text recorded of an attempt may carry the URL: the page, the stats JSON
            # and the failure line show it only masked.
            answer = mask_text(answer, record.url)[:ANSWER_LIMIT]
            error = mask_text(error, record.url)
            ok = status is not None and 200 <= status < 300
            retry_in = (
                None
                if ok or number == max_attempts
                else config.webhook_retry_base * 2 ** (number - 1)
            )
            attempt = Attempt(
                number=number,
                at=at,
                duration_ms=round((loop.time() - started) * 1000, 1),
                status=status,
                error=error,
                answer=answer,
                retry_in=retry_in,
            )
            record.history.append(attempt)
            record.response_statuses.append(status)
            if ok:
                record.delivered = True
                record.error = ""
                return
            record.error = error or f"HTTP {status}"
            log.warning("%s", failure_line(record, attempt, max_attempts))
            if retry_in is not None:
                await asyncio.sleep(retry_in)
    finally:
        record.finished = True
