"""The protocol of the service, free of I/O: requests, answers, retries, paging, the converter."""

from asyncsdk._protocol.convert import make_converter, unwrap_envelope
from asyncsdk._protocol.paging import listing, next_page_params, walk
from asyncsdk._protocol.requests import FormBody, Request, endpoint, query
from asyncsdk._protocol.responses import read_response, status_error
from asyncsdk._protocol.retry import (
    IDEMPOTENT_METHODS,
    RETRYABLE_STATUSES,
    RetryPolicy,
    parse_retry_after,
)

__all__ = [
    "IDEMPOTENT_METHODS",
    "RETRYABLE_STATUSES",
    "FormBody",
    "Request",
    "RetryPolicy",
    "endpoint",
    "listing",
    "make_converter",
    "next_page_params",
    "parse_retry_after",
    "query",
    "read_response",
    "status_error",
    "unwrap_envelope",
    "walk",
]
