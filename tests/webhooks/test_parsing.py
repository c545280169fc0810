"""The sans-io parse step: bytes and a content type in, an event or a reason out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from whtools import encode, payload

from webhooks import Rejection
from webhooks.contract import Ignored, Parsed, parse_delivery

CT = "application/json"
MAX_JSON_DEPTH = 32
"""The deepest nesting a delivery may have (the real payload is 3 levels deep)."""


def too_deep(body: bytes) -> bool:
    result = parse_delivery(body, CT)
    return isinstance(result, Rejection) and result.code == "too_deep"


def test_a_service_payload_parses_with_the_webhook_url_spelling() -> None:
    result = parse_delivery(encode(payload("p-9", extra_field={"new": 1})), CT)
    assert isinstance(result, Parsed)
    event = result.event
    assert (event.process_id, event.status, event.order_id) == ("p-9", "done", "order-1")
    assert event.final_assets[0].src == "https://cdn.example/p-9.jpg?sig=1"
    assert event.final_assets[0].thumbnail_src == "https://cdn.example/p-9-t.jpg?sig=1"
    assert event.dedup_key == ("process.completed", "p-9", "done")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", 'Application/JSON; charset="UTF-8"'],
)
def test_json_content_types_with_optional_utf8_charset_are_accepted(content_type: str) -> None:
    result = parse_delivery(encode(payload("p-ct")), content_type)
    assert isinstance(result, Parsed)
    assert result.event.process_id == "p-ct"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "words"),
    [
        (encode(payload()), None, 415, "missing Content-Type"),
        (encode(payload()), "text/plain", 415, "application/json"),
        (encode(payload()), "application/json; charset=latin-1", 415, "UTF-8"),
        (b"", CT, 400, "empty body"),
        (b"   \n", CT, 400, "empty body"),
        (b'{"event": "process.completed", "process_id": "p', CT, 400, "not valid JSON"),
        (b"\xff\xfe{}", CT, 400, "UTF-8"),
        (b"[" * 5000 + b"]" * 5000, CT, 400, "nests deeper"),
        (b"[1, 2]", CT, 400, "JSON object, not an array"),
        (b"null", CT, 400, "JSON object, not null"),
        (b'{"process_id": "p"}', CT, 400, "missing field 'event'"),
        (b'{"event": 7}', CT, 400, "'event' must be a string"),
        (encode({**payload(), "process_id": 5}), CT, 400, "'process_id' must be a non-empty"),
        (encode({**payload(), "status": ""}), CT, 400, "not an empty string"),
        (encode({**payload(), "tool": None}), CT, 400, "'tool' must be a non-empty string"),
        (encode({k: v for k, v in payload().items() if k != "order_id"}), CT, 400, "order_id"),
        (encode({**payload(), "final_assets": {"a": 1}}), CT, 400, "must be an array"),
        (encode({**payload(), "final_assets": ["x"]}), CT, 400, "final_assets[0] must be"),
        (encode({**payload(), "final_assets": [{"temp_src": "u"}]}), CT, 400, "asset_id"),
        (
            encode({**payload(), "final_assets": [{"asset_id": "a", "temp_src": 3}]}),
            CT,
            400,
            "temp_src must be a string",
        ),
    ],
)
def test_bad_deliveries_get_a_4xx_with_a_reason(
    body: bytes, content_type: str | None, status: int, words: str
) -> None:
    result = parse_delivery(body, content_type)
    assert isinstance(result, Rejection)
    assert result.status == status
    assert words in result.reason


@pytest.mark.parametrize("field", ["process_id", "order_id", "tool", "status"])
def test_an_id_past_200_characters_or_with_a_control_character_is_refused(field: str) -> None:
    for value, words in (
        ("p" * 201, "201 characters long, over the 200 an id may have"),
        ("p-1\x1b[2J", "unprintable character U+001B"),
        ("p-1\x00", "unprintable character U+0000"),
        ("   ", "is only spaces"),
    ):
        result = parse_delivery(encode({**payload(), field: value}), CT)
        assert isinstance(result, Rejection)
        assert result.status == 400
        assert f"field {field!r} " in result.reason
        assert words in result.reason
        assert "send the id the service gave" in result.reason


def test_an_asset_id_is_held_to_the_same_bounds() -> None:
    asset = {"asset_id": "a" * 300, "temp_src": "https://cdn.example/a.jpg"}
    result = parse_delivery(encode({**payload(), "final_assets": [asset]}), CT)
    assert isinstance(result, Rejection)
    assert "final_assets[0].asset_id is 300 characters long" in result.reason


def test_ids_up_to_200_printable_characters_of_any_script_parse() -> None:
    longest = "é" * 199 + "😀"
    body = {**payload(process_id=longest, status="failed"), "order_id": longest, "status": longest}
    result = parse_delivery(encode(body), CT)
    assert isinstance(result, Parsed)
    assert result.event.dedup_key == ("process.completed", longest, longest)


def test_an_unknown_event_type_is_ignored_not_rejected() -> None:
    result = parse_delivery(b'{"event": "process.started", "whatever": [1]}', CT)
    assert isinstance(result, Ignored)
    assert result.code == "unknown_event"


def test_failed_events_may_omit_or_null_final_assets() -> None:
    body = {k: v for k, v in payload(status="failed").items() if k != "final_assets"}
    result = parse_delivery(encode(body), CT)
    assert isinstance(result, Parsed)
    assert result.event.final_assets == ()
    result = parse_delivery(encode({**body, "final_assets": None}), CT)
    assert isinstance(result, Parsed)
    assert result.event.final_assets == ()


def test_unknown_statuses_and_tools_parse() -> None:
    result = parse_delivery(encode(payload(status="partially-done", tool="tool-new")), CT)
    assert isinstance(result, Parsed)
    assert result.event.status == "partially-done"


def test_depth_check_ignores_brackets_inside_strings() -> None:
    tricky = json.dumps({"s": "[" * 100 + '\\"{' * 50, "t": ["]]]]"]}).encode()
    assert not too_deep(tricky)
    assert too_deep(b"{" * (MAX_JSON_DEPTH + 1))
    assert not too_deep(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(JSON_VALUES)
def test_any_json_value_gets_a_verdict_never_an_exception(value: object) -> None:
    result = parse_delivery(json.dumps(value).encode(), CT)
    # The sender gets an answer to act on: a 4xx that says what is wrong, or an ack.
    assert isinstance(result, Parsed | Ignored | Rejection)
    if isinstance(result, Rejection):
        assert 400 <= result.status < 500
        assert result.reason


@given(st.binary(max_size=200))
def test_any_bytes_get_a_verdict_never_an_exception(body: bytes) -> None:
    result = parse_delivery(body, CT)
    assert isinstance(result, Parsed | Ignored | Rejection)
    if isinstance(result, Rejection):
        assert 400 <= result.status < 500


def test_a_lone_surrogate_escape_is_refused_and_a_pair_is_kept() -> None:
    lone = json.dumps(payload("p-\ud800-x")).encode()  # ensure_ascii writes "\ud800"
    assert b"\\ud800" in lone
    refused = parse_delivery(lone, CT)
    assert isinstance(refused, Rejection)
    assert (refused.status, refused.code) == (400, "encoding")
    assert "surrogate" in refused.reason
    paired = parse_delivery(json.dumps(payload("p-\U0001f600")).encode(), CT)  # "\ud83d\ude00"
    assert isinstance(paired, Parsed)
    assert paired.event.process_id == "p-\U0001f600"
