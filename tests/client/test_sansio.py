"""The protocol decisions as plain functions: Retry-After, retry policy, pagination, errors."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import aiohttp
import pytest
from yarl import URL

from asyncsdk import APITimeoutError, BadRequestError, RetryPolicy, ServerError, Timeout

# The protocol's pure functions (and the transport's error translation) have no public name; they
# are tested here as plain functions, without a server.
from asyncsdk._protocol import endpoint, next_page_params, parse_retry_after, status_error
from asyncsdk._transport import translate
from asyncsdk._uploads import sniff_image_type

NOW = 1_750_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        ("0", 0.0),
        ("0.25", 0.25),
        (" 7 ", 7.0),
        ("-1", None),
        ("soon", None),
        ("", None),
        (format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True), 30.0),
        (format_datetime(datetime.fromtimestamp(NOW - 30, UTC), usegmt=True), 0.0),
    ],
)
def test_parse_retry_after(value: str, expected: float | None) -> None:
    assert parse_retry_after({"Retry-After": value}, now=NOW) == expected


def test_parse_retry_after_is_case_insensitive_and_optional() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({}) is None


def ceiling() -> float:
    return 1.0


def test_backoff_is_exponential_with_a_cap() -> None:
    policy = RetryPolicy(backoff_initial=0.5, backoff_max=3.0)
    assert [policy.backoff(n, ceiling) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.backoff(2, lambda: 0.0) == 0.0  # full jitter reaches down to zero
    assert policy.backoff(10_000, ceiling) == 3.0


@pytest.mark.parametrize(
    ("method", "status", "retried"),
    [
        ("GET", 429, True),
        ("GET", 502, True),
        ("GET", 503, True),
        ("GET", 504, True),
        ("GET", 500, False),
        ("GET", 404, False),
        ("POST", 429, True),
        ("POST", 502, False),
        ("POST", 503, False),
        ("POST", 504, False),
    ],
)
def test_status_retry_decisions(method: str, status: int, retried: bool) -> None:
    delay = RetryPolicy().after_status(method, 0, status, {}, rand=ceiling)
    assert (delay is not None) is retried


def test_status_retry_limits() -> None:
    policy = RetryPolicy(max_retries=2, max_retry_after=10)
    assert policy.after_status("GET", 2, 503, {}) is None
    assert policy.after_status("GET", 0, 503, {}, replayable=False) is None
    assert policy.after_status("GET", 0, 429, {"Retry-After": "4"}) == 4.0
    assert policy.after_status("GET", 0, 429, {"Retry-After": "11"}) is None


@pytest.mark.parametrize(
    ("method", "sent", "retried"),
    [("GET", True, True), ("GET", False, True), ("POST", False, True), ("POST", True, False)],
)
def test_failure_retry_decisions(method: str, sent: bool, retried: bool) -> None:
    delay = RetryPolicy().after_failure(method, 0, request_sent=sent)
    assert (delay is not None) is retried


@pytest.mark.parametrize(
    ("exc", "sent", "is_timeout"),
    [
        (aiohttp.ConnectionTimeoutError("slow connect"), False, True),
        (aiohttp.SocketTimeoutError("slow read"), True, True),
        (TimeoutError(), True, True),
        (aiohttp.ServerDisconnectedError(), True, False),
        (aiohttp.ClientPayloadError("short"), True, False),
        (aiohttp.ClientOSError(104, "reset"), True, False),
    ],
)
def test_network_failures_are_classified(exc: Exception, sent: bool, is_timeout: bool) -> None:
    error, retryable = translate(exc, method="POST", url="http://x/v3/process", timeout=Timeout())
    assert error.request_sent is sent
    assert isinstance(error, APITimeoutError) is is_timeout
    assert retryable
    assert "POST http://x/v3/process" in str(error)


def test_status_error_reads_the_error_body() -> None:
    error = status_error(
        400,
        {"Content-Type": "application/json", "x-api-key": "echoed"},
        b'{"error": "wrong asset role", "key": "api_error_asset_role"}',
        method="POST",
        url="http://x/v3/order",
    )
    assert isinstance(error, BadRequestError)
    assert (error.message, error.key) == ("wrong asset role", "api_error_asset_role")
    assert "x-api-key" not in error.headers
    assert str(error) == "400 [api_error_asset_role]: wrong asset role (POST http://x/v3/order)"


def test_status_error_without_body_uses_the_reason_phrase() -> None:
    error = status_error(503, {}, b"", method="GET", url="http://x")
    assert isinstance(error, ServerError)
    assert error.message == "Service Unavailable"


@pytest.mark.parametrize(
    ("next_page", "expected"),
    [
        ("?page=2&limit=10", {"page": "2", "limit": "10", "sort": "asc"}),
        ("page=3&limit=10", {"page": "3", "limit": "10", "sort": "asc"}),
        ("", None),
        ("?page=1&limit=10", None),
        ("?limit=10", {"page": "2", "limit": "10", "sort": "asc"}),
    ],
)
def test_next_page_params(next_page: str, expected: dict[str, str] | None) -> None:
    current = {"page": "1", "limit": "10", "sort": "asc"}
    assert next_page_params(next_page, current, page=1, total_pages=5) == expected


def test_next_page_without_number_stops_after_the_last_page() -> None:
    assert next_page_params("?limit=10", {"page": "5"}, page=5, total_pages=5) is None


def test_endpoint_keeps_the_base_path_and_encodes_segments() -> None:
    base = URL("https://api.example.com/prefix")
    assert str(endpoint(base, "v3", "order", "a/b c")) == (
        "https://api.example.com/prefix/v3/order/a%2Fb%20c"
    )


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"\xff\xd8\xff\xdb", "image/jpeg"),
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"RIFF\x10\x00\x00\x00WAVEfmt ", None),
        (b"GIF89a", None),
        (b"", None),
    ],
)
def test_sniff_image_type(head: bytes, expected: str | None) -> None:
    assert sniff_image_type(head) == expected
