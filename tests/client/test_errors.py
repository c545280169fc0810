"""Non-2xx answers map to the error tree; bodies that match no model are decode errors."""

from __future__ import annotations

import logging
import re
import traceback
from typing import Any

import pytest

import asyncsdk
from asyncsdk import (
    APIConnectionError,
    APIDecodeError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    Client,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    UnprocessableEntityError,
)

from ._fake import API_KEY, FakeService, Reply, process_json, project_json
from .conftest import MakeClient


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, APIStatusError),
        (422, UnprocessableEntityError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
    ],
)
async def test_every_status_maps_to_its_error(
    fake: FakeService, make_client: MakeClient, status: int, cls: type[APIStatusError]
) -> None:
    client = make_client(max_retries=0)
    fake.script(
        "GET",
        "/v3/process/pr1",
        Reply(
            status=status,
            json={"error": "the thing went wrong", "key": "api_error_thing"},
            headers={"X-Request-Id": "req-7"},
        ),
    )

    with pytest.raises(cls) as info:
        await client.processes.get("pr1")

    error = info.value
    assert type(error) is cls
    assert error.status == status
    assert error.key == "api_error_thing"
    assert error.message == "the thing went wrong"
    assert error.headers["X-Request-Id"] == "req-7"
    assert error.method == "GET"
    assert error.url.endswith("/v3/process/pr1")
    assert "api_error_thing" in str(error)


async def test_error_without_json_takes_the_raw_text(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/project", Reply(status=400, text="<h1>Bad gateway config</h1>"))

    with pytest.raises(BadRequestError) as info:
        await client.projects.create("x")

    assert info.value.key == ""
    assert info.value.message == "<h1>Bad gateway config</h1>"


async def test_rate_limit_without_key_or_retry_after(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(max_retries=0)
    fake.script(
        "POST", "/v3/process", Reply(status=429, json={"error": "rate-limit exceeded, wait"})
    )

    with pytest.raises(RateLimitError) as info:
        await client.processes.create("o1", "tool-x", {"tool-x-input-image": "a1"})

    assert info.value.key == ""
    assert info.value.retry_after is None
    assert "rate-limit exceeded" in str(info.value)


async def test_redirects_are_not_followed(fake: FakeService, client: Client) -> None:
    fake.script(
        "GET",
        "/v3/project/p1",
        Reply(status=301, headers={"Location": "https://elsewhere.example/v3/project/p1"}),
    )

    with pytest.raises(APIStatusError, match=r"elsewhere\.example.*base_url") as info:
        await client.projects.get("p1")

    assert info.value.status == 301
    assert len(fake.seen) == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=200, text="<html><body>Welcome to the proxy</body></html>"),
        Reply(status=200, text='{"id": "p1", "address": ', content_type="application/json"),
        Reply(status=200, json=[1, 2, 3]),
        Reply(status=200, json={"address": "no id"}),
        Reply(status=204),
    ],
    ids=["html", "truncated-json", "array", "missing-field", "empty"],
)
async def test_bodies_matching_no_model_are_decode_errors(
    fake: FakeService, client: Client, reply: Reply
) -> None:
    fake.script("GET", "/v3/project/p1", reply)

    with pytest.raises(APIDecodeError) as info:
        await client.projects.get("p1")

    assert info.value.status in (200, 204)
    assert "GET" in str(info.value)


async def test_strict_mode_rejects_unknown_fields(
    fake: FakeService, make_client: MakeClient
) -> None:
    body = dict(project_json(), surprise=1)
    fake.script("GET", "/v3/project/p1", Reply(json=body))

    assert (await make_client().projects.get("p1")).id == "p1"
    with pytest.raises(APIDecodeError, match="surprise"):
        await make_client(strict=True).projects.get("p1")


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"final_assets": [{"src": "u1"}]}, r"final_assets\[0\]\.asset_id"),
        ({"final_assets": [{"asset_id": "r1"}, "x"]}, r"final_assets\[1\]"),
        ({"final_assets": {"asset_id": "r1"}}, "final_assets"),
        ({"feedback": {"type": "", "description": "", "extra": 1}}, "extra"),
        ({"feedback": ["no"]}, "feedback"),
    ],
)
async def test_result_and_feedback_errors_name_where(
    fake: FakeService, make_client: MakeClient, body: dict[str, Any], where: str
) -> None:
    fake.script("GET", "/v3/process/pr1", Reply(json={**process_json("pr1", "done"), **body}))

    with pytest.raises(APIDecodeError, match=where):
        await make_client(strict=True).processes.get("pr1")


@pytest.mark.parametrize(
    "body",
    [
        {"process_ids": "pr1"},
        {"process_ids": ["pr1"], "surprise": 1},
        {"process_group_id": "g1"},
    ],
)
async def test_created_processes_of_other_shapes_are_decode_errors(
    fake: FakeService, make_client: MakeClient, body: dict[str, Any]
) -> None:
    fake.script("POST", "/v3/process", Reply(status=201, json=body))

    with pytest.raises(APIDecodeError, match="expected shape"):
        await make_client(strict=True).processes.create("o1", "tool-x", {"slot": "a1"})


async def test_the_key_never_shows_in_errors_reprs_or_logs(
    fake: FakeService,
    make_client: MakeClient,
    free_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client(max_retries=1)
    fake.script(
        "GET",
        "/v3/project/p1",
        Reply(status=503, json={"error": "busy"}),
        Reply(status=401, json={"error": "bad key", "key": "api_error_auth"}),
    )
    texts = [repr(client), str(client), repr(client.settings), str(client.settings)]
    with pytest.raises(AuthenticationError) as status_info:
        await client.projects.get("p1")
    offline = make_client(base_url=f"http://127.0.0.1:{free_port}", max_retries=1)
    with pytest.raises(APIConnectionError) as conn_info:
        await offline.projects.create("x")
    for error in (status_info.value, conn_info.value):
        texts += [str(error), repr(error), "".join(traceback.format_exception(error))]
        texts += [repr(vars(error))]
    texts += [record.getMessage() for record in caplog.records]

    assert any("retrying" in text for text in texts)  # the log did record the retries
    for text in texts:
        assert API_KEY not in text


def _drawn_tree() -> dict[str, str]:
    """Each class of the tree drawn in the error module's docstring, and the parent drawn for it.

    The drawing is documentation with no public name, hence the private module: what is checked
    is that a reader of it learns every error ``asyncsdk`` exports, each under its real parent.
    """
    import asyncsdk._errors

    doc = asyncsdk._errors.__doc__ or ""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        found = re.match(r"^\s{4}([\s│├└─]*)([A-Z]\w+)\s", line + " ")
        if not found:
            continue
        depth, name = len(found.group(1)), found.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else ""
        stack.append((depth, name))
    return parents


def test_the_drawn_error_tree_holds_every_exported_error_under_its_parent() -> None:
    exported = {
        name: value
        for name in asyncsdk.__all__
        if isinstance(value := getattr(asyncsdk, name), type)
        and issubclass(value, asyncsdk.AsyncSDKError)
    }
    drawn = _drawn_tree()
    assert set(drawn) == set(exported)
    for name, cls in exported.items():
        ours = [base.__name__ for base in cls.__bases__ if issubclass(base, asyncsdk.AsyncSDKError)]
        assert ours == ([drawn[name]] if drawn[name] else []), name
