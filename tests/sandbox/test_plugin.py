"""The pytest plugin, the public surface, and the command-line server."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import aiohttp
import pytest

import asyncsdk.sandbox
from asyncsdk.sandbox import Sandbox, SandboxConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sandbox_config() -> SandboxConfig:
    """Overrides the plugin's default for this module, as a user's conftest would."""
    return SandboxConfig(enveloped=True, seed=7)


async def test_sandbox_client_uses_its_urls_and_the_key_given(sandbox: Sandbox) -> None:
    async with sandbox.client() as client:
        tools = await client.tools.list()
        assert tools
        settings = repr(client)
        assert sandbox.api_key not in settings
    async with sandbox.client(api_key="sk_sandbox_limited", max_retries=0) as limited:
        assert len(await limited.tools.list()) == len(tools)
    assert sandbox.stats.requests["GET /api/tools"] == 2


async def test_sandbox_fixture_uses_the_overridden_config(sandbox: Sandbox) -> None:
    assert sandbox.config.enveloped is True
    assert sandbox.config.seed == 7
    assert sandbox.base_url.startswith("http://127.0.0.1:")
    assert sandbox.app_url == sandbox.base_url
    assert sandbox.api_key == "sk_sandbox_enterprise"
    async with aiohttp.ClientSession() as s, s.get(f"{sandbox.base_url}/api/tools") as r:
        assert (await r.json())["message"] == "ok"


def test_plugin_is_registered_and_imports_cleanly() -> None:
    names = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert "asyncsdk_sandbox" in names  # the installed package registers it
    # What the next install registers (an editable install keeps the entry points it was made
    # with until it is made again).
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert declared["project"]["entry-points"]["pytest11"] == {
        "asyncsdk_sandbox": "_asyncsdk_pytest"
    }
    for name in ("_asyncsdk_pytest", "asyncsdk.sandbox.pytest_plugin"):
        plugin = importlib.import_module(name)
        assert {"sandbox", "sandbox_config"} <= set(plugin.__all__)


def test_loading_the_plugin_imports_none_of_the_sdk() -> None:
    """pytest loads the plugin into every run of a project that installs the SDK: loading it must
    not import the SDK (its client, aiohttp), which the fixtures import when a test uses them."""
    probe = (
        "import json, sys, _asyncsdk_pytest; print(json.dumps(sorted(name for name in sys.modules"
        " if name.partition('.')[0] in ('asyncsdk', 'webhooks', 'aiohttp', 'cattrs', 'yarl'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == []


def test_public_names() -> None:
    assert set(asyncsdk.sandbox.__all__) == {
        "DEFAULT_API_KEY",
        "LIMITED_API_KEY",
        "Attempt",
        "Chaos",
        "ChaosKind",
        "ChaosRule",
        "Delivery",
        "Sandbox",
        "SandboxConfig",
        "Stats",
        "main",
        "run_forever",
        "serve",
    }


async def test_stop_removes_the_files_and_a_sandbox_starts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sandbox keeps its files in a folder of the temporary directory: here, tmp_path.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    sb = Sandbox()
    async with sb:
        async with aiohttp.ClientSession(
            base_url=sb.base_url, headers={"x-api-key": sb.api_key}
        ) as s:
            form = aiohttp.FormData()
            from .conftest import gradient_jpeg

            form.add_field("asset_file", gradient_jpeg(), filename="a.jpg")
            async with s.post("/v3/order", data=form) as r:
                assert r.status == 201
        [root] = os.listdir(tmp_path)
        assert os.listdir(tmp_path / root)  # the uploaded photo
        with pytest.raises(RuntimeError, match="already running"):
            await sb.start()
    assert os.listdir(tmp_path) == []


def test_base_url_before_start_names_the_fix() -> None:
    with pytest.raises(RuntimeError, match="async with Sandbox"):
        _ = Sandbox().base_url


async def test_command_line_server() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asyncsdk.sandbox",
        "--port",
        "0",
        "--pending-delay",
        "0",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert "serving on http://127.0.0.1:" in line
        base = line.split("serving on ")[1].split()[0]
        async with aiohttp.ClientSession() as s, s.get(f"{base}/api/tools") as r:
            assert r.status == 200
            assert len((await r.json())["data"]) == 14
    finally:
        proc.terminate()
        assert await proc.wait() == 0  # SIGTERM stops it cleanly
