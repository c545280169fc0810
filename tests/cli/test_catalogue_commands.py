"""``asyncsdk tools`` and ``asyncsdk widgets``: tables and JSON."""

from __future__ import annotations

import json

import pytest

from asyncsdk.cli import main
from asyncsdk.sandbox import Sandbox, SandboxConfig

from .conftest import run_cli


def test_tools_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--json", "--sandbox"]) == 0
    tools = json.loads(capsys.readouterr().out)
    slugs = {tool["slug"] for tool in tools}
    assert {"tool-virtual-staging", "tool-day-to-dusk", "tool-item-removal-mask"} <= slugs
    assert all(tool["is_active"] for tool in tools)


def test_widgets_json_names_what_process_takes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["widgets", "image-enhancement", "--json", "--sandbox"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tool"] == "tool-image-enhancement"
    by_handle = {widget["handle"]: widget for widget in data["widgets"]}
    assert by_handle["space"]["values"] == ["indoor", "outdoor"]
    assert by_handle["space"]["required"] is True
    assert by_handle["space"]["slug"] == "widget-area-tool-image-enhancement"
    assert by_handle["enhancement_options"]["multiple"] is True
    assert "sky-replacement" in by_handle["enhancement_options"]["values"]


def test_widgets_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["widgets", "tool-virtual-staging", "--sandbox"]) == 0
    out = capsys.readouterr().out
    space = next(line for line in out.splitlines() if line.startswith("space "))
    assert space.split()[1:3] == ["yes", "one"]
    assert "bedroom" in space
    assert "--widget space=" in out
    assert "--widget style=" in out


def test_unknown_tool_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["widgets", "tool-virtual-stagin", "--sandbox"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown tool 'tool-virtual-stagin': did you mean")
    assert err.count("\n") == 1


async def test_tools_need_no_key_but_widgets_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sb.base_url)
        assert await run_cli("tools") == 0
        assert "tool-virtual-staging" in capsys.readouterr().out
        assert await run_cli("widgets", "tool-virtual-staging") == 2
        assert "no API key" in capsys.readouterr().err
        monkeypatch.setenv("ASYNCSDK_API_KEY", "sk_not_a_key")
        assert await run_cli("widgets", "tool-virtual-staging") == 3
        err = capsys.readouterr().err
        assert err.startswith("error: 401")
        assert "Traceback" not in err
