"""What ``docs/sandbox.md`` promises about running the sandbox, checked over HTTP."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from asyncsdk.sandbox import LIMITED_API_KEY, Sandbox, SandboxConfig

from .conftest import Flow, error_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"


def _value(text: str) -> Any:
    if text == "None":
        return None
    if text in {"True", "False"}:
        return text == "True"
    return float(text)


def documented_options() -> dict[str, tuple[Any, Any]]:
    """Setting -> (default in Python, default on the command line), from the settings table."""
    rows = re.findall(
        r"^\| `(\w+)` \| ([\w.]+) \| `--[\w-]+`, default ([\w.]+) \|", DOCS.read_text(), re.M
    )
    return {name: (_value(python), _value(cli)) for name, python, cli in rows}


def _port_in(path: Path) -> int | None:
    return int(path.read_text()) if path.exists() else None


async def _read_port(path: Path, proc: asyncio.subprocess.Process) -> int:
    for _ in range(300):
        if (port := _port_in(path)) is not None:
            return port
        assert proc.returncode is None, "the sandbox exited before writing its port"
        await asyncio.sleep(0.05)
    raise AssertionError(f"no port file at {path} after 15 s")


async def test_an_ipv6_host_gives_a_base_url_that_works() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    async with Sandbox(host="::1") as sb:
        assert sb.base_url.startswith("http://[::1]:")
        async with aiohttp.ClientSession() as http, http.get(f"{sb.base_url}/api/tools") as r:
            assert r.status == 200


async def test_a_start_that_cannot_write_its_port_file_releases_its_port(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sandbox = Sandbox(port=port, port_file=tmp_path / "missing" / "sandbox.port")
    with pytest.raises(FileNotFoundError):
        await sandbox.start()
    with socket.socket() as again:  # the server the failed start had bound is gone
        again.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    "command", [["-m", "asyncsdk.sandbox"], ["-m", "asyncsdk", "sandbox"]], ids=["module", "cli"]
)
async def test_port_file_and_the_documented_defaults(tmp_path: Path, command: list[str]) -> None:
    options = documented_options()
    assert options["pending_delay"] == (0, 1)
    assert options["processing_delay"] == (0, 3)
    port_file = tmp_path / "sandbox.port"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *command,
        "--port",
        "0",
        "--port-file",
        str(port_file),
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        port = await _read_port(port_file, proc)
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.0.1:{port}/_sandbox/config") as r,
        ):
            assert r.status == 200
            running = await r.json()
    finally:
        proc.terminate()
        assert await proc.wait() == 0
    assert not port_file.exists()  # removed when the server stops
    defaults = SandboxConfig()
    for name, (python, cli) in options.items():
        assert running[name] == cli, name
        assert getattr(defaults, name) == python, name


async def test_the_limited_keys_example_tool_is_outside_its_plan(sandbox: Sandbox) -> None:
    keys = re.search(r"^Keys: (.+?)\n\n", DOCS.read_text(), re.M | re.S)
    assert keys is not None
    example = re.search(r"e\.g\. `(tool-[\w-]+)`", keys.group(1))
    assert example is not None
    async with aiohttp.ClientSession(
        base_url=sandbox.base_url, headers={"x-api-key": LIMITED_API_KEY}
    ) as limited:
        own = Flow(limited)
        order = await own.order()

        async def create(tool: str, widgets: list[dict[str, Any]]) -> aiohttp.ClientResponse:
            body = {
                "order_id": order["order_id"],
                "tool": tool,
                "asset_map": {f"{tool}-input-image": order["assets"][0]["id"]},
                "widgets": widgets,
            }
            async with limited.post("/v3/process", json=body) as r:
                await r.read()
                return r

        refused = await create(example.group(1), [])
        assert refused.status == 403
        async with limited.get(f"/v1/cathub/tools/{example.group(1)}/widgets") as r:
            assert r.status == 403
            assert (await error_of(r))["key"] == "api_error_forbidden"
        area = "widget-area-tool-image-enhancement"
        allowed = await create(
            "tool-image-enhancement", [{"slug": area, "item_slugs": [f"item-indoor-{area}"]}]
        )
        assert allowed.status == 201


async def test_resources_are_visible_only_to_the_key_that_made_them(
    sandbox: Sandbox, flow: Flow
) -> None:
    sandbox.config.api_keys["sk_sandbox_other"] = None
    project = await flow.project("7 Mill Lane")
    order = await flow.order(project_id=project["id"])
    process = await flow.process(order=order)
    async with aiohttp.ClientSession(
        base_url=sandbox.base_url, headers={"x-api-key": "sk_sandbox_other"}
    ) as other:
        for path, what in [
            (f"/v3/project/{project['id']}", "project"),
            (f"/v3/project/{project['id']}/order", "project"),
            (f"/v3/order/{order['order_id']}", "order"),
            (f"/v1/order/{order['order_id']}", "order"),
            (f"/v3/process/{process}", "process"),
        ]:
            async with other.get(path) as r:
                assert r.status == 404, path
                assert (await error_of(r))["key"] == f"api_error_{what}_not_found"
        async with other.get("/v3/project") as r:
            assert r.status == 200
            assert (await r.json())["data"] == []
        body = {
            "order_id": order["order_id"],
            "tool": "tool-day-to-dusk",
            "asset_map": {"tool-day-to-dusk-input-image": order["assets"][0]["id"]},
        }
        async with other.post("/v3/process", json=body) as r:
            assert r.status == 404
    assert (await flow.get(f"/v3/order/{order['order_id']}"))["id"] == order["order_id"]
