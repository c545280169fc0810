"""Property-based tests of the webhook request path, over real HTTP.

One aiohttp server per test function, with the receiver mounted on a memory inbox and a waiter
registry; hypothesis drives many requests through it: any body (binary, JSON-ish, deep nesting,
huge strings and numbers, valid events with a few fields broken), any extra headers, any content
type, any content encoding, any token or signature.  For every request:

* the answer is never a 5xx and the server logs no error;
* an invalid event is answered 4xx (or 200 ``ignored`` for another event type) and reaches no
  handler;
* a valid event is answered 200 and reaches the handler exactly once;
* with a verifier, an event that fails verification reaches neither a handler nor the registry.

Whether a request is valid is decided here from the documented contract (``docs/webhooks.md``,
spec section 6), independently of the receiver's code.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import hmac
import itertools
import json
import logging
import math
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, Final

import aiohttp
import attrs
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from asyncsdk import ProcessCompleted, WaitTimeoutError
from webhooks import (
    MemoryInbox,
    NoVerification,
    Registry,
    StandardWebhooksVerifier,
    TokenVerifier,
    Verifier,
    WebhookReceiver,
)

EXAMPLES: Final = 400
MAX_BODY: Final = 16 * 1024
MAX_DEPTH: Final = 32  # documented: "too deep JSON" is refused
MAX_ID: Final = 200  # documented: longer ids, or ids with an unprintable character, are refused
PID: Final = "@@PID@@"  # replaced by a unique process id in every request
REQUIRED: Final = ("process_id", "order_id", "tool", "status")
ASSET_STRINGS: Final = (
    "asset_id",
    "asset_type",
    "asset_role",
    "src",
    "temp_src",
    "thumbnail_src",
    "temp_thumbnail_src",
)
TOKEN: Final = "tok-" + "Q7xv9LmP2wRz" * 3
OLD_TOKEN: Final = "old-" + "k2Jd8sNq4TyB" * 3
SECRET: Final = "whsec_" + base64.b64encode(b"s" * 32).decode()
OLD_SECRET: Final = "whsec_" + base64.b64encode(b"o" * 32).decode()
NOW: Final = 1_700_000_000
PROPERTY_SETTINGS: Final = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- strategies --------------------------------------------------------------------------------

TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
HEADER_NAME_CHARS = TOKEN_CHARS + "!#$%&'*+^`|"
FRAMING = {"content-length", "transfer-encoding", "host", "connection", "expect", "upgrade"}
AUTH_HEADERS = {"x-webhook-token", "webhook-id", "webhook-timestamp", "webhook-signature"}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
urls = st.sampled_from(
    ["https://cdn.example/r.jpg?sig=1", "http://evil.example/x.jpg", ""]
) | st.text(max_size=30)
assets = st.fixed_dictionaries(
    {"asset_id": st.text(min_size=1, max_size=12)},
    optional={
        "asset_type": st.just("image"),
        "asset_role": st.just("result"),
        "temp_src": urls,
        "temp_thumbnail_src": urls,
        "src": urls,
        "unknown": json_values,
    },
)
events = st.fixed_dictionaries(
    {
        "event": st.just("process.completed"),
        "process_id": st.just(PID),
        "order_id": st.text(min_size=1, max_size=12),
        "tool": st.sampled_from(["tool-virtual-staging", "tool-day-to-dusk"])
        | st.text(min_size=1, max_size=30),
        "status": st.sampled_from(["done", "failed"]) | st.text(min_size=1, max_size=10),
    },
    optional={"final_assets": st.lists(assets, max_size=3) | st.none(), "extra": json_values},
)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


@st.composite
def broken_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid event, then up to three breakages (some harmless, most not)."""
    event: dict[str, Any] = draw(events)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(
            st.sampled_from(["drop", "retype", "empty", "other_event", "asset", "deep", "huge"])
        )
        key = draw(st.sampled_from(["event", *REQUIRED, "final_assets"]))
        if kind == "drop":
            event.pop(key, None)
        elif kind == "retype":
            event[key] = draw(json_values)
        elif kind == "empty":
            event[key] = ""
        elif kind == "other_event":
            event["event"] = draw(st.sampled_from(["process.started", "order.created", ""]))
        elif (
            kind == "asset"
            and isinstance(event.get("final_assets"), list)
            and event["final_assets"]
            and isinstance(event["final_assets"][0], dict)
        ):
            field = draw(st.sampled_from(ASSET_STRINGS))
            event["final_assets"][0][field] = draw(json_values)
        elif kind == "deep":
            event["extra"] = nested(draw(st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3)))
        elif kind == "huge":
            event["order_id"] = "x" * draw(
                st.sampled_from([MAX_BODY - 200, MAX_BODY]) | st.integers(0, 2 * MAX_BODY)
            )
    return event


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    family = draw(
        st.sampled_from(
            ["event", "event", "event", "event", "binary", "jsonish", "deep", "number", "text"]
        )
    )
    if family == "event":
        text = json.dumps(draw(broken_events()), ensure_ascii=draw(st.booleans()))
        text = draw(st.sampled_from(["", " ", "\n", "\ufeff"])) + text
        text += draw(st.sampled_from(["", "\n", " ", "}", "x", "[]", "\x00"]))
        return text.encode("utf-8", "surrogatepass")
    if family == "binary":
        return draw(st.binary(max_size=2048))
    if family == "jsonish":
        return json.dumps(draw(json_values)).encode()
    if family == "deep":
        depth = draw(st.sampled_from([MAX_DEPTH, MAX_DEPTH + 1, 20_000]) | st.integers(1, 20_000))
        shape = draw(st.sampled_from(["list", "object", "unbalanced", "in-string", "mixed"]))
        if shape == "list":
            return b"[" * depth + b"]" * depth
        if shape == "object":
            return b'{"a":' * depth + b"1" + b"}" * depth
        if shape == "unbalanced":
            return b"[" * depth
        if shape == "in-string":  # brackets inside a string are not nesting
            return json.dumps({"event": "process.completed", "x": "[" * depth}).encode()
        return json.dumps(nested(min(depth, 200))).encode()
    if family == "number":
        digits = "9" * draw(st.sampled_from([1, 4300, 4301, 10_000]) | st.integers(1, 10_000))
        where = draw(st.sampled_from(["bare", "field", "float"]))
        if where == "bare":
            return digits.encode()
        if where == "float":
            return f'{{"event": "process.completed", "n": {digits}.5e{digits[:4]}}}'.encode()
        return (
            f'{{"event": "process.completed", "process_id": "{PID}", "order_id": "o", '
            f'"tool": "t", "status": "done", "n": {digits}}}'
        ).encode()
    return draw(st.text(max_size=200)).encode(draw(st.sampled_from(["utf-8", "utf-16", "utf-32"])))


VALID_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    'application/json;charset="UTF-8"',
    "APPLICATION/JSON ; Charset=utf8",
    "application/json; boundary=x",
]
INVALID_TYPES = [
    None,
    "",
    "text/plain",
    "application/json; charset=latin-1",
    "application/jsonp",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=abc",
    "application/json; charset=utf-16",
    "text/html; charset=utf-8",
]
header_values = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=40,
)
content_types = (
    st.sampled_from(VALID_TYPES)
    | st.sampled_from(VALID_TYPES)
    | st.sampled_from(INVALID_TYPES)
    | header_values
    | st.builds(lambda rest: "application/json;" + rest, header_values)
)
random_header_names = st.text(alphabet=HEADER_NAME_CHARS, min_size=1, max_size=20).filter(
    lambda name: name.lower() not in FRAMING | AUTH_HEADERS | {"content-type", "content-encoding"}
)
extra_headers = st.lists(
    st.tuples(
        st.sampled_from(["X-Forwarded-For", "User-Agent", "Accept", "Referer", "Cookie"])
        | random_header_names,
        header_values,
    ),
    max_size=5,
)
encodings = st.sampled_from([None, None, None, "identity", "gzip", "deflate", "br", "x-junk"])


# --- the oracle: what the documentation says a request is ---------------------------------------


def content_type_ok(value: str | None) -> bool:
    """``application/json`` with no charset or a UTF-8 one (docs/webhooks.md)."""
    if not value:
        return False
    media, _, params = value.partition(";")
    if media.strip().lower() != "application/json":
        return False
    for param in params.split(";"):
        name, _, charset = param.partition("=")
        if name.strip().lower() == "charset" and charset.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            return False
    return True


def depth(value: Any) -> int:
    """Nesting of arrays and objects (iterative: the value may be thousands deep)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, list | dict):
            deepest = max(deepest, level + 1)
            stack.extend((child, level + 1) for child in _children(item))
    return deepest


def _children(item: list[Any] | dict[str, Any]) -> list[Any]:
    return list(item.values()) if isinstance(item, dict) else item


def is_id(value: object) -> bool:
    """A string an id may be: 1 to ``MAX_ID`` printable characters, not all spaces."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID
        and value.isprintable()
        and not value.isspace()
    )


def classify(body: bytes) -> tuple[str, str | None]:
    """``("event", pid)``, ``("ignored", None)`` or ``("invalid", pid-or-None)`` for a body."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "invalid", None
    if depth(value) > MAX_DEPTH or not isinstance(value, dict):
        return "invalid", None
    pid = value.get("process_id") if isinstance(value.get("process_id"), str) else None
    if not isinstance(value.get("event"), str):
        return "invalid", pid
    if value["event"] != "process.completed":
        return "ignored", None
    if not all(is_id(value.get(name)) for name in REQUIRED):
        return "invalid", pid
    final_assets = value.get("final_assets")
    if final_assets is None:
        return "event", pid
    if not isinstance(final_assets, list):
        return "invalid", pid
    for asset in final_assets:
        if not isinstance(asset, dict):
            return "invalid", pid
        if not is_id(asset.get("asset_id")):
            return "invalid", pid
        if any(name in asset and not isinstance(asset[name], str) for name in ASSET_STRINGS):
            return "invalid", pid
    return "event", pid


# --- the server under test ---------------------------------------------------------------------


@attrs.define
class Answer:
    status: int
    body: bytes


class Harness:
    """The receiver on 127.0.0.1, driven from synchronous hypothesis examples.

    The event loop is ours (``asyncio.Runner``): each example runs one request to completion.
    """

    def __init__(self, verifier: Verifier) -> None:
        self.verifier = verifier
        self.runner = asyncio.Runner()
        self.handled: list[ProcessCompleted] = []
        self.registry = Registry()
        self.forbidden: set[str] = set()  # process ids that must reach no handler or registry
        self.expected: list[str] = []  # process ids that must reach the handler, once each
        self._ids = itertools.count()
        self._settled: asyncio.Event | None = None

    def __enter__(self) -> Harness:
        self.runner.__enter__()
        self.runner.run(self._start())
        return self

    def __exit__(self, *_: object) -> None:
        try:
            self.runner.run(self._stop())
        finally:
            self.runner.__exit__(None, None, None)

    async def _start(self) -> None:
        self.receiver = WebhookReceiver(
            inbox=MemoryInbox(),
            verifier=self.verifier,
            registry=self.registry,
            max_body=MAX_BODY,
            poll_interval=0.05,
            read_timeout=2.0,
        )

        @self.receiver.on_completed()
        async def record(event: ProcessCompleted) -> None:
            self.handled.append(event)

        app = web.Application()
        self.receiver.setup(app, prefix="/hooks/")
        self.app_runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self.app_runner.setup()
        site = web.TCPSite(self.app_runner, "127.0.0.1", 0)
        await site.start()
        self.base = f"http://127.0.0.1:{self.app_runner.addresses[0][1]}/hooks/"
        self.http = aiohttp.ClientSession(auto_decompress=False)

    async def _stop(self) -> None:
        await self.http.close()
        await self.app_runner.cleanup()
        await self.registry.close()

    def unique_pid(self) -> str:
        return f"pid-{next(self._ids)}"

    def post(self, path: str, body: bytes, headers: CIMultiDict[str]) -> Answer:
        return self.runner.run(self._post(path, body, headers))

    async def _post(self, path: str, body: bytes, headers: CIMultiDict[str]) -> Answer:
        skip = [] if "Content-Type" in headers else ["Content-Type"]
        async with self.http.post(
            self.base + path, data=body, headers=headers, skip_auto_headers=skip
        ) as response:
            return Answer(response.status, await response.read())

    def settle(self) -> None:
        """Wait until everything stored has been handled (a guard, not a timing assertion)."""
        self.runner.run(self._settle())

    async def _busy(self) -> bool:
        return bool(self.receiver._pool.in_flight or await self.receiver.inbox.pending_count())

    async def _settle(self) -> None:
        async with asyncio.timeout(10):
            while await self._busy():  # noqa: ASYNC110 - the state lives in the inbox
                await asyncio.sleep(0.005)

    def check_handled(self) -> None:
        self.settle()
        handled = [event.process_id for event in self.handled]
        # An id that was also delivered verified (a repeated retyped id) may be handled.
        only_forbidden = self.forbidden - set(self.expected)
        assert not only_forbidden & set(handled), "an invalid or unverified event was handled"
        assert sorted(handled) == sorted(self.expected), "a valid event was lost or handled twice"

    def check_registry(self) -> None:
        async def resolved(pid: str) -> bool:
            try:
                await self.registry.wait(pid, timeout=0)
            except WaitTimeoutError:
                return False
            return True

        async def check() -> None:
            for pid in self.forbidden:
                assert not await resolved(pid), f"the registry was resolved for {pid}"
            for pid in self.expected:
                assert await resolved(pid)

        self.runner.run(check())

    def check_run(self, *, refused: bool) -> None:
        """After a property run: handlers and registry saw exactly the valid events, and the
        strategies did produce valid events (and, with ``refused``, refused ones too)."""
        self.check_handled()
        self.check_registry()
        assert self.expected
        if refused:
            assert self.forbidden


def encode(body: bytes, encoding: str | None, honest: bool) -> bytes:
    if encoding == "gzip" and honest:
        return gzip.compress(body)
    if encoding == "deflate" and honest:
        return zlib.compress(body)
    return body


def decoded_as_sent(body: bytes, encoding: str | None, honest: bool) -> bytes | None:
    """The body the receiver will see once the server has decoded it; None when it cannot
    (a coding it does not know, as x-junk, is refused 415 before the body is read)."""
    if encoding in (None, "identity"):
        return body
    if encoding in ("gzip", "deflate") and honest:
        return body
    return None


@attrs.frozen
class Request:
    """One drawn request and the oracle's verdict on its body."""

    path: str
    wire_body: bytes
    headers: CIMultiDict[str]
    verdict: str  # "event", "ignored", "invalid"
    pid: str | None


def build(
    harness: Harness,
    body: bytes,
    content_type: str | None,
    extra: list[tuple[str, str]],
    encoding: str | None = None,
    honest: bool = True,
    path: str = "",
    auth_headers: Mapping[str, str] | None = None,
) -> Request:
    if PID.encode() in body:
        pid = harness.unique_pid()
        body = body.replace(PID.encode(), pid.encode())
    wire = encode(body, encoding, honest)
    # One of each name: repeating a singleton header is refused by the HTTP layer (400) before
    # the receiver sees the request.
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in extra:
        headers.setdefault(name, value)
    if content_type is not None:
        headers["Content-Type"] = content_type
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    for name, value in (auth_headers or {}).items():
        headers.add(name, value)
    seen = decoded_as_sent(body, encoding, honest)
    verdict, found = "invalid", None
    if seen is not None:
        verdict, found = classify(seen)
    else:
        found = classify(body)[1]
    if (
        not content_type_ok(content_type)
        or len(wire) > MAX_BODY
        or (seen is not None and len(seen) > MAX_BODY)
    ):
        verdict = "invalid"
    return Request(path, wire, headers, verdict, found)


def check_answer(harness: Harness, request: Request, answer: Answer, verified: bool) -> None:
    """The per-request properties."""
    assert answer.status < 500, f"{answer.status}: {answer.body[:300]!r}"
    status = ""
    if answer.status == 200:
        status = json.loads(answer.body)["status"]
    if not verified:
        # 404/405: the router found no route for a path that is not a token at all.
        assert answer.status in (400, 401, 404, 405, 408, 413, 415), answer
        if request.pid:
            harness.forbidden.add(request.pid)
        return
    if request.verdict == "event":
        assert request.pid is not None
        if request.pid in harness.expected:
            # A retyped process_id (e.g. "000000") can come up again in a later example: the
            # same event delivered twice is a duplicate, as the dedup key promises.
            assert (answer.status, status) == (200, "duplicate"), answer
            return
        assert (answer.status, status) == (200, "accepted"), answer
        harness.expected.append(request.pid)
    elif request.verdict == "ignored":
        assert (answer.status, status) == (200, "ignored"), answer
    else:
        assert 400 <= answer.status < 500, answer
        if request.pid:
            harness.forbidden.add(request.pid)


@pytest.fixture
def server_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail if the server logged an error (an exception it did not turn into an answer)."""
    caplog.set_level(logging.WARNING)
    yield
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


# --- the properties ----------------------------------------------------------------------------


@pytest.mark.usefixtures("server_errors")
def test_any_request_without_verifier() -> None:
    with Harness(NoVerification()) as harness:

        @PROPERTY_SETTINGS
        @given(
            body=bodies(),
            content_type=content_types,
            extra=extra_headers,
            encoding=encodings,
            honest=st.booleans(),
            path=st.sampled_from(["", "", "anything", "a%2Fb"]),
        )
        def one_request(
            body: bytes,
            content_type: str | None,
            extra: list[tuple[str, str]],
            encoding: str | None,
            honest: bool,
            path: str,
        ) -> None:
            request = build(harness, body, content_type, extra, encoding, honest, path)
            answer = harness.post(request.path, request.wire_body, request.headers)
            check_answer(harness, request, answer, verified=True)
            harness.check_handled()

        one_request()
        harness.check_run(refused=False)


@st.composite
def token_auth(draw: st.DrawFn) -> tuple[str, dict[str, str], bool]:
    """(path segment, headers, verified) for a TokenVerifier with [TOKEN, OLD_TOKEN]."""
    wrong = draw(
        st.sampled_from(
            [
                "x" * len(TOKEN),  # wrong, equal length
                TOKEN[:-1] + "A",  # wrong in the last character
                TOKEN.swapcase(),
                TOKEN[:16],
                TOKEN + "x",
                "old-" + TOKEN[4:],
            ]
        )
        | st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=60)
    )
    if wrong in (TOKEN, OLD_TOKEN):
        wrong = wrong + "-"
    right = draw(st.sampled_from([TOKEN, OLD_TOKEN]))
    shape = draw(
        st.sampled_from(
            [
                "path",
                "header",
                "both",
                "path-right-header-wrong",
                "path-wrong-header-right",
                "path-wrong",
                "header-wrong",
                "missing",
                "encoded-path",
                "both-wrong",
            ]
        )
    )
    if shape == "path":
        return right, {}, True
    if shape == "header":
        return "", {"X-Webhook-Token": right}, True
    if shape == "both":
        return right, {"x-webhook-token": right}, True
    if shape == "path-right-header-wrong":
        return right, {"x-webhook-token": wrong}, True
    if shape == "path-wrong-header-right":
        return wrong, {"x-webhook-token": right}, True
    if shape == "path-wrong":
        return wrong, {}, False
    if shape == "header-wrong":
        return "", {"x-webhook-token": wrong}, False
    if shape == "encoded-path":  # a percent-encoded look-alike is not the token
        return right[:-1] + f"%{ord(right[-1]) + 1:02X}", {}, False
    if shape == "both-wrong":
        return wrong, {"X-WEBHOOK-TOKEN": wrong}, False
    return "", {}, False


@pytest.mark.usefixtures("server_errors")
def test_unverified_tokens_reach_no_handler() -> None:
    with Harness(TokenVerifier([TOKEN, OLD_TOKEN])) as harness:

        @PROPERTY_SETTINGS
        @given(
            body=bodies() | broken_events().map(lambda e: json.dumps(e).encode()),
            content_type=content_types,
            extra=extra_headers,
            auth=token_auth(),
        )
        def one_request(
            body: bytes,
            content_type: str | None,
            extra: list[tuple[str, str]],
            auth: tuple[str, dict[str, str], bool],
        ) -> None:
            path, auth_headers, verified = auth
            request = build(
                harness, body, content_type, extra, path=path, auth_headers=auth_headers
            )
            answer = harness.post(request.path, request.wire_body, request.headers)
            check_answer(harness, request, answer, verified=verified)
            harness.check_handled()

        one_request()
        harness.check_run(refused=True)


def signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


@st.composite
def signed(draw: st.DrawFn, body: bytes) -> tuple[dict[str, str], bool]:
    """Standard Webhooks headers for ``body`` and whether they verify (tolerance 300 s)."""
    msg_id = draw(st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=20))
    skew = draw(st.sampled_from([0, 0, -299, 299, -301, 301, -86_400, 86_400]))
    timestamp = str(NOW + skew)
    fresh = abs(skew) <= 300
    secret = draw(st.sampled_from([SECRET, OLD_SECRET]))
    good = signature(secret, msg_id, timestamp, body)
    shape = draw(
        st.sampled_from(
            [
                "valid",
                "valid-among-others",
                "other-body",
                "wrong-secret",
                "other-id",
                "v2",
                "truncated",
                "missing-id",
                "missing-timestamp",
                "missing-signature",
                "bad-timestamp",
            ]
        )
    )
    headers = {"webhook-id": msg_id, "webhook-timestamp": timestamp}
    if shape == "valid":
        return {**headers, "webhook-signature": f"v1,{good}"}, fresh
    if shape == "valid-among-others":
        return {**headers, "webhook-signature": f"v1,AAAA v1a,{good} v1,{good}"}, fresh
    if shape == "other-body":
        forged = signature(secret, msg_id, timestamp, body + b" ")
        return {**headers, "webhook-signature": f"v1,{forged}"}, False
    if shape == "wrong-secret":
        forged = signature("whsec_" + base64.b64encode(b"w" * 32).decode(), msg_id, timestamp, body)
        return {**headers, "webhook-signature": f"v1,{forged}"}, False
    if shape == "other-id":
        return {**headers, "webhook-id": msg_id + "x", "webhook-signature": f"v1,{good}"}, False
    if shape == "v2":
        return {**headers, "webhook-signature": f"v2,{good}"}, False
    if shape == "truncated":
        return {**headers, "webhook-signature": f"v1,{good[:-4]}"}, False
    if shape == "bad-timestamp":
        bad = draw(st.sampled_from(["", "abc", "1e9", "-5", "1" * 13, f" {timestamp}x"]))
        return {**headers, "webhook-timestamp": bad, "webhook-signature": f"v1,{good}"}, False
    missing = shape.removeprefix("missing-")
    full = {**headers, "webhook-signature": f"v1,{good}"}
    return {k: v for k, v in full.items() if k != f"webhook-{missing}"}, False


@pytest.mark.usefixtures("server_errors")
def test_unsigned_or_badly_signed_events_reach_no_handler() -> None:
    verifier = StandardWebhooksVerifier([SECRET, OLD_SECRET], clock=lambda: float(NOW))
    with Harness(verifier) as harness:

        @PROPERTY_SETTINGS
        @given(
            body=bodies() | broken_events().map(lambda e: json.dumps(e).encode()),
            content_type=content_types,
            extra=extra_headers,
            data=st.data(),
        )
        def one_request(
            body: bytes,
            content_type: str | None,
            extra: list[tuple[str, str]],
            data: st.DataObject,
        ) -> None:
            if PID.encode() in body:
                body = body.replace(PID.encode(), harness.unique_pid().encode())
            auth_headers, verified = data.draw(signed(body))
            request = build(harness, body, content_type, extra, auth_headers=auth_headers)
            answer = harness.post(request.path, request.wire_body, request.headers)
            check_answer(harness, request, answer, verified=verified)
            harness.check_handled()

        one_request()
        harness.check_run(refused=True)


def test_oracle_agrees_with_the_documentation_on_plain_cases() -> None:
    """The oracle itself: a few bodies whose verdict the documentation states outright."""
    event = {
        "event": "process.completed",
        "process_id": "p",
        "order_id": "o",
        "tool": "t",
        "status": "done",
    }
    assert classify(json.dumps(event).encode()) == ("event", "p")
    assert classify(json.dumps({**event, "final_assets": None}).encode()) == ("event", "p")
    assert classify(json.dumps({**event, "event": "x"}).encode()) == ("ignored", None)
    assert classify(json.dumps({**event, "status": ""}).encode())[0] == "invalid"
    assert classify(json.dumps({**event, "extra": nested(MAX_DEPTH)}).encode())[0] == "invalid"
    assert classify(json.dumps({**event, "extra": nested(MAX_DEPTH - 1)}).encode())[0] == "event"
    assert classify(b"9" * 5000)[0] == "invalid"
    assert classify(b"[" * 100_000)[0] == "invalid"
    assert content_type_ok("application/json; charset=UTF-8")
    assert not content_type_ok("application/json; charset=latin-1")
    assert math.isinf(json.loads("Infinity"))
