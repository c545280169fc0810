"""Every recipe of docs/cookbook.md runs against the sandbox (and Redis), and does what it says."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import logging
import math
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
import redis.asyncio
import uvicorn
from aiohttp import web
from aiohttp.test_utils import TestServer
from codeblocks import ROOT, code_block, code_blocks, run_block
from PIL import Image, ImageDraw, ImageStat

import asyncsdk
from asyncsdk import ProcessStatus, ToolSlug, check_mask, samples
from asyncsdk.sandbox import Sandbox, SandboxConfig
from webhooks import RECEIVER_KEY, RedactingAccessLogger, Registry

COOKBOOK = ROOT / "docs" / "cookbook.md"
TOKEN = "cookbook-" + "t0k3n" * 6
STAGING = ToolSlug.VIRTUAL_STAGING
BEDROOM = str(samples.path("bedroom-empty.jpg"))
KITCHEN = samples.path("kitchen.jpg")
BEDROOM_PHOTO = samples.path("bedroom-empty.jpg").read_bytes()
WIDGETS = {"space": "bedroom", "style": "modern"}
RECIPES = {
    "batch-folder",
    "resume-at-startup",
    "mount-receiver",
    "fastapi-receiver",
    "github-receiver",
    "webhook-or-poll",
    "redis-receivers",
    "postgres-receivers",
    "sandbox-fixture",
    "chaos",
    "masks",
    "widgets",
    "errors",
    "settings",
    "quickstart",
}


def rgb(source: Path | io.BytesIO) -> Image.Image:
    with Image.open(source) as image:
        return image.convert("RGB")


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Return once ``condition()`` holds; fail after ``seconds``."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - the state lives in the recipe's handler
            await asyncio.sleep(0.02)


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released) for a recipe's main."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def environment(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """What a recipe's main reads: the sandbox's address and key, a webhook token; run in a
    temporary folder, where its files land."""
    monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    monkeypatch.setenv("ASYNCSDK_WEBHOOK_TOKEN", TOKEN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
async def served() -> AsyncIterator[Callable[[web.Application], Any]]:
    """Serves apps on 127.0.0.1 (port 0) for the test; all are closed afterwards."""
    servers: list[TestServer] = []

    async def serve(app: web.Application) -> TestServer:
        server = TestServer(app, host="127.0.0.1", port=0)
        await server.start_server()
        servers.append(server)
        return server

    yield serve
    for server in reversed(servers):
        await server.close()


def test_the_cookbook_has_every_recipe_and_only_tested_blocks() -> None:
    assert set(code_blocks(COOKBOOK)) == RECIPES
    # A python block without a test marker would be a recipe that nothing runs.
    assert COOKBOOK.read_text(encoding="utf-8").count("```python") == len(RECIPES)


async def test_batch_folder_stages_every_photo_with_a_progress_bar(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "batch-folder")
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("bedroom-empty.jpg", "living-room-empty.jpg", "kitchen.jpg"):
        shutil.copy(samples.path(name), folder / name)
    (folder / "notes.txt").write_text("not a photo\n")
    (folder / "broken.png").write_bytes(b"not a png either")
    async with sandbox.client() as client:
        outcomes = await recipe["stage_folder"](client, folder, tmp_path / "staged")
    assert outcomes.pop("broken.png").startswith("error: ")
    assert outcomes == dict.fromkeys(
        ["bedroom-empty.jpg", "kitchen.jpg", "living-room-empty.jpg"], "done"
    )
    staged = sorted((tmp_path / "staged").iterdir())
    assert [p.name for p in staged] == [
        "bedroom-empty-staged-1.jpg",
        "kitchen-staged-1.jpg",
        "living-room-empty-staged-1.jpg",
    ]
    assert all(p.read_bytes().startswith(b"\xff\xd8\xff") for p in staged)  # JPEG files
    err = capsys.readouterr().err
    assert err.startswith("\r[------------------------------] 0/4 photos, 0 failed")
    assert err.endswith("\r[" + "#" * 30 + "] 4/4 photos, 1 failed\n")
    assert sandbox.stats.processes_created == 3


async def test_batch_folder_main_stages_into_staged(
    sandbox: Sandbox, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "batch-folder")
    folder = environment / "photos"
    folder.mkdir()
    shutil.copy(BEDROOM, folder / "bedroom.jpg")
    await recipe["main"](folder)
    assert capsys.readouterr().out == "bedroom.jpg: done\n"
    assert (environment / "staged" / "bedroom-staged-1.jpg").read_bytes().startswith(b"\xff\xd8")


async def test_the_web_service_stages_a_repeated_request_once(
    sandbox: Sandbox, tmp_path: Path, served: Callable[[web.Application], Any]
) -> None:
    recipe = run_block(COOKBOOK, "resume-at-startup")
    options = {"base_url": sandbox.base_url, "api_key": sandbox.api_key, "min_poll_interval": 0.01}
    app = recipe["make_app"](str(tmp_path / "runs.sqlite3"), **options)
    server = await served(app)
    url = server.make_url("/listings/l-42/rooms/bedroom/staging")
    photo = BEDROOM_PHOTO
    async with aiohttp.ClientSession() as session:
        for _ in range(2):  # the user clicked twice
            async with session.post(url, data=photo) as answer:
                assert answer.status == 202
        await until(lambda: "l-42/bedroom" in app[recipe["RESULTS"]])
        await until(lambda: not app[recipe["RUNS"]])
        async with session.get(url) as answer:
            shown = await answer.json()
    assert shown["status"] == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 1


async def test_the_web_service_resumes_the_runs_it_stopped_at_its_next_start(
    sandbox: Sandbox, tmp_path: Path, served: Callable[[web.Application], Any]
) -> None:
    recipe = run_block(COOKBOOK, "resume-at-startup")
    journal = tmp_path / "runs.sqlite3"
    options = {"base_url": sandbox.base_url, "api_key": sandbox.api_key, "min_poll_interval": 0.01}
    sandbox.config.processing_delay = 2.0
    first = await served(recipe["make_app"](str(journal), **options))
    async with aiohttp.ClientSession() as session:
        url = first.make_url("/listings/l-42/rooms/bedroom/staging")
        async with session.post(url, data=BEDROOM_PHOTO) as answer:
            assert answer.status == 202
    await until(lambda: sandbox.stats.processes_created == 1)
    await first.close()  # a deploy: the run is stopped while the process runs
    assert sandbox.stats.processes_done == 0
    app = recipe["make_app"](str(journal), **options)
    await served(app)  # the next instance resumes the run at start-up
    await until(lambda: "l-42/bedroom" in app[recipe["RESULTS"]], seconds=15)
    assert app[recipe["RESULTS"]]["l-42/bedroom"].status == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 1


async def test_the_receiver_mounted_in_an_existing_app_keeps_results(
    sandbox: Sandbox, tmp_path: Path, served: Callable[[web.Application], Any]
) -> None:
    recipe = run_block(COOKBOOK, "mount-receiver")
    app = recipe["existing_app"]()
    recipe["add_webhooks"](app, TOKEN, str(tmp_path / "webhooks.sqlite3"))
    server = await served(app)
    sandbox.register_webhook(str(server.make_url(f"/hooks/{TOKEN}")))
    async with sandbox.client() as client:
        process = await client.run(STAGING, BEDROOM, widgets=WIDGETS)
    results = app[recipe["RESULTS"]]
    await until(lambda: process.id in results)
    assert len(results[process.id]) == 1
    assert results[process.id][0].split("?")[0] == process.final_assets[0].src.split("?")[0]
    async with aiohttp.ClientSession() as session:
        health = await session.get(server.make_url("/health"))
        assert await health.json() == {"ok": True}
    assert (tmp_path / "webhooks.sqlite3").exists()


async def test_the_fastapi_recipe_keeps_results_under_uvicorn(
    sandbox: Sandbox, environment: Path
) -> None:
    recipe = run_block(COOKBOOK, "fastapi-receiver")
    app = recipe["make_app"](TOKEN, str(environment / "fastapi.sqlite3"))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:
        await until(lambda: server.started or serving.done())
        port = server.servers[0].sockets[0].getsockname()[1]
        sandbox.register_webhook(f"http://127.0.0.1:{port}/hooks/{TOKEN}")
        async with sandbox.client() as client:
            process = await client.run(STAGING, BEDROOM, widgets=WIDGETS)
        results = app.state.results
        await until(lambda: process.id in results)
        assert results[process.id][0].split("?")[0] == process.final_assets[0].src.split("?")[0]
        async with aiohttp.ClientSession() as session:
            health = await session.get(f"http://127.0.0.1:{port}/health")
            assert await health.json() == {"ok": True}
    finally:
        server.should_exit = True
        await serving
    assert (environment / "fastapi.sqlite3").exists()


async def test_the_github_recipe_verifies_stores_once_and_handles_pushes(
    tmp_path: Path, served: Callable[[web.Application], Any]
) -> None:
    recipe = run_block(COOKBOOK, "github-receiver")
    app = web.Application()
    secret = "gh-" + "s3cr3t" * 6
    recipe["add_github"](app, secret, str(tmp_path / "github.sqlite3"))
    server = await served(app)
    url = server.make_url("/github/")

    def delivery(event: str, guid: str, payload: dict[str, Any], key: str = secret) -> Any:
        body = json.dumps(payload).encode()
        signature = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": guid,
            "X-Hub-Signature-256": f"sha256={signature}",
        }
        return {"data": body, "headers": headers}

    push = {"ref": "refs/heads/main", "after": "1f2e3d4c", "commits": []}
    answers = []
    async with aiohttp.ClientSession() as session:
        for sent in (
            delivery("ping", "guid-0", {"zen": "Keep it simple."}),
            delivery("push", "guid-1", push),
            delivery("push", "guid-1", push),  # a redelivery from the repository's settings
            delivery("push", "guid-2", push, key="not-the-secret"),
        ):
            async with session.post(url, **sent) as response:
                answers.append((response.status, await response.json()))
        tampered = delivery("push", "guid-3", push)
        tampered["data"] = tampered["data"].replace(b"1f2e3d4c", b"deadbeef")
        async with session.post(url, **tampered) as response:
            answers.append((response.status, None))
    assert answers[:3] == [
        (200, {"status": "accepted"}),
        (200, {"status": "accepted"}),
        (200, {"status": "duplicate"}),
    ]
    assert answers[3] == (401, {"error": "X-Hub-Signature-256 does not match the body"})
    assert answers[4][0] == 401
    pushes = app[recipe["PUSHES"]]
    await until(lambda: pushes == ["1f2e3d4c"])


async def test_mount_receiver_main_serves_the_app_and_stages_a_photo(
    sandbox: Sandbox, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "mount-receiver")
    port = free_port()
    sandbox.register_webhook(f"http://127.0.0.1:{port}/hooks/{TOKEN}")
    await recipe["main"](BEDROOM, port)
    process_id, urls = capsys.readouterr().out.split(" ", 1)
    assert urls.startswith(f"['{sandbox.base_url}/")  # the result's URL, kept by the handler
    assert sandbox.stats.processes_created == 1
    assert [d.process_id for d in sandbox.stats.deliveries if d.delivered] == [process_id]
    assert (environment / "webhooks.sqlite3").exists()


async def test_the_result_comes_by_webhook_without_a_poll(
    sandbox: Sandbox, served: Callable[[web.Application], Any]
) -> None:
    recipe = run_block(COOKBOOK, "webhook-or-poll")
    async with Registry() as registry:
        server = await served(recipe["receiver_app"](TOKEN, registry))
        sandbox.register_webhook(str(server.make_url(f"/hooks/{TOKEN}")))
        async with sandbox.client() as client:
            process = await recipe["stage"](client, registry, BEDROOM)
    assert process.status == ProcessStatus.DONE
    assert process.final_assets
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0


async def test_webhook_or_poll_main_runs_the_receiver_and_the_waiting_side(
    sandbox: Sandbox, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "webhook-or-poll")
    port = free_port()
    sandbox.register_webhook(f"http://127.0.0.1:{port}/hooks/{TOKEN}")
    await recipe["main"](BEDROOM, port)
    assert re.fullmatch(r"\S+ done \['http://\S+'\]\n", capsys.readouterr().out)
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0  # woken by the webhook


async def test_without_a_webhook_the_wait_falls_back_to_polling(sandbox: Sandbox) -> None:
    recipe = run_block(COOKBOOK, "webhook-or-poll")
    async with Registry() as registry:
        registry.set_healthy(True)  # a receiver that is up, but no webhook ever comes
        started = asyncio.get_running_loop().time()
        async with sandbox.client() as client:
            process = await recipe["stage"](client, registry, BEDROOM, webhook_grace=0.2)
        waited = asyncio.get_running_loop().time() - started
    assert process.status == ProcessStatus.DONE
    assert sandbox.stats.requests["GET /v3/process/{id}"] >= 1
    assert waited >= 0.2


@pytest.mark.redis
async def test_three_receivers_on_redis_handle_each_event_once(
    sandbox: Sandbox,
    redis_url: str,
    redis_prefix: str,
    raw_redis: redis.asyncio.Redis,
    served: Callable[[web.Application], Any],
) -> None:
    recipe = run_block(COOKBOOK, "redis-receivers")
    apps = [recipe["make_app"](TOKEN, redis_url, redis_prefix) for _ in range(3)]
    for app in apps:
        server = await served(app)
        # Every event goes to all three, as a load balancer retrying on each of them would.
        sandbox.register_webhook(str(server.make_url(f"/hooks/{TOKEN}")))
    registries = [app[recipe["REGISTRY"]] for app in apps]
    for registry in registries:
        # Subscribed before the first wait, as the recipe's main does: a wait on a registry
        # that is not listening yet polls at once, which the last assertion would count.
        await registry.start()
    async with sandbox.client() as client:
        processes = await asyncio.gather(
            *(client.run(STAGING, BEDROOM, widgets=WIDGETS, registry=r) for r in registries)
        )
    ids = {process.id for process in processes}
    assert len(ids) == 3
    assert all(process.status == ProcessStatus.DONE for process in processes)
    handled = f"{redis_prefix}handled"

    async def count() -> int:
        return int(await raw_redis.get(handled) or 0)

    async with asyncio.timeout(15):
        while await count() < 3:  # noqa: ASYNC110 - the state lives in Redis
            await asyncio.sleep(0.05)
    await sandbox.wait_idle()
    await asyncio.sleep(0.3)  # time for a wrongly repeated handler run to show
    assert await count() == 3
    statuses = await raw_redis.hgetall(f"{redis_prefix}status")
    assert {key.decode(): value.decode() for key, value in statuses.items()} == dict.fromkeys(
        ids, "done"
    )
    # A waiter on any instance gets the event, whichever instance stored it.
    for registry in registries:
        event = await registry.wait(processes[0].id, timeout=5)
        assert event.status == "done"
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0


@pytest.mark.redis
async def test_redis_main_waits_on_one_instance_for_a_webhook_another_received(
    sandbox: Sandbox,
    environment: Path,
    redis_url: str,
    redis_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    served: Callable[[web.Application], Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = run_block(COOKBOOK, "redis-receivers")
    monkeypatch.setenv("REDIS_URL", redis_url)
    # The webhook goes to another instance only, as a load balancer may send it.
    other = await served(recipe["make_app"](TOKEN, redis_url, redis_prefix))
    sandbox.register_webhook(str(other.make_url(f"/hooks/{TOKEN}")))
    await recipe["main"](free_port(), BEDROOM, prefix=redis_prefix)
    assert re.fullmatch(r"\S+ done\n", capsys.readouterr().out)
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0  # woken through Redis


@pytest.mark.postgres
async def test_postgres_main_waits_on_one_instance_for_a_webhook_another_received(
    sandbox: Sandbox,
    environment: Path,
    postgres_dsn: str,
    postgres_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    served: Callable[[web.Application], Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = run_block(COOKBOOK, "postgres-receivers")
    monkeypatch.setenv("DATABASE_URL", postgres_dsn)
    other_app = recipe["make_app"](TOKEN, postgres_dsn, postgres_schema)
    other = await served(other_app)
    sandbox.register_webhook(str(other.make_url(f"/hooks/{TOKEN}")))
    await recipe["main"](free_port(), BEDROOM, schema=postgres_schema)
    assert re.fullmatch(r"\S+ done\n", capsys.readouterr().out)
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0  # woken through PostgreSQL


@pytest.mark.postgres
async def test_three_receivers_on_postgres_record_each_event_once(
    sandbox: Sandbox,
    postgres_dsn: str,
    postgres_schema: str,
    served: Callable[[web.Application], Any],
) -> None:
    recipe = run_block(COOKBOOK, "postgres-receivers")
    apps = [recipe["make_app"](TOKEN, postgres_dsn, postgres_schema) for _ in range(3)]
    for app in apps:
        server = await served(app)
        # Every event goes to all three, as a load balancer retrying on each of them would.
        sandbox.register_webhook(str(server.make_url(f"/hooks/{TOKEN}")))
    registries = [app[RECEIVER_KEY].registry for app in apps]
    # Each registry listens once its node has started; until then a waiter would poll.
    await until(lambda: all(registry.healthy for registry in registries))
    async with sandbox.client() as client:
        processes = await asyncio.gather(
            *(client.run(STAGING, BEDROOM, widgets=WIDGETS, registry=r) for r in registries)
        )
    ids = {process.id for process in processes}
    assert len(ids) == 3
    conn = await asyncpg.connect(postgres_dsn)
    try:
        select = f'SELECT process_id, status, attempt FROM "{postgres_schema}".photo_results'

        async def rows() -> list[asyncpg.Record]:
            return list(await conn.fetch(select))

        async with asyncio.timeout(15):
            while len(await rows()) < 3:  # noqa: ASYNC110 - the state lives in PostgreSQL
                await asyncio.sleep(0.05)
        await sandbox.wait_idle()
        await asyncio.sleep(0.3)  # time for a wrongly repeated write to show
        assert {
            r["process_id"]: (r["status"], r["attempt"]) for r in await rows()
        } == dict.fromkeys(ids, ("done", 1))
    finally:
        await conn.close()
    # A waiter on any instance gets the event, whichever instance stored it.
    for registry in registries:
        event = await registry.wait(processes[0].id, timeout=5)
        assert event.status == "done"
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0


async def test_the_web_service_stages_photos_answering_each_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    namespace = run_block(COOKBOOK, "quickstart")
    assert namespace["RESULT_WAIT"] == 20.0  # the wait the recipe states
    monkeypatch.chdir(tmp_path)  # the example's SQLite inbox lands here
    token = secrets.token_urlsafe(24)
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with Sandbox(SandboxConfig(pending_delay=0.05, processing_delay=0.1)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sb.base_url)
        app = namespace["make_app"](token)
        # As the recipe's run_app does: the access log hides the webhook token.
        server = TestServer(app, host="127.0.0.1", port=0)
        await server.start_server(access_log_class=RedactingAccessLogger)
        async with server, aiohttp.ClientSession() as session:
            sb.register_webhook(str(server.make_url(f"/hooks/{token}")))
            photo = samples.path("bedroom-empty.jpg").read_bytes()

            # 202 at once, with the process id and where to ask for the result.
            async with session.post(server.make_url("/stage"), data=photo) as response:
                assert response.status == 202
                accepted = await response.json()
                location = response.headers["Location"]
            process_id = accepted["process_id"]
            assert accepted == {"process_id": process_id, "status": "pending"}
            assert location == f"/stage/{process_id}"

            async with session.get(server.make_url(location)) as response:
                assert response.status == 200
                body = await response.json()
            assert body["status"] == "done"
            async with session.get(body["results"][0]) as image:
                assert image.content_type == "image/jpeg"

            # A file that is not a photo: 400 with the SDK's message, and nothing sent.
            async with session.post(server.make_url("/stage"), data=b"not a photo") as response:
                assert response.status == 400
                message = await response.text()
            assert "is not a JPG, PNG or WEBP image" in message
            assert sb.stats.orders_created == 1

            # A process still running: the GET answers 202 once the stated wait has passed.
            sb.config.pending_delay = math.inf
            async with session.post(server.make_url("/stage"), data=photo) as response:
                assert response.status == 202
                slow = await response.json()
            namespace["RESULT_WAIT"] = 0.3
            started = time.monotonic()
            async with session.get(server.make_url(f"/stage/{slow['process_id']}")) as response:
                assert response.status == 202
                assert (await response.json())["status"] == "processing"
            assert time.monotonic() - started < 5
            polled = sb.stats.requests["GET /v3/process/{id}"]
            assert polled == 1  # no webhook by half-time: the service was asked once

            # An id the service never made: 404, once the service has said so.
            async with session.get(server.make_url("/stage/no-such-process")) as response:
                assert response.status == 404
                assert "no process 'no-such-process'" in await response.text()
            assert sb.stats.requests["GET /v3/process/{id}"] == polled + 1

            # The generation window full: 429 with when to come back, and nothing uploaded.
            app[namespace["CLIENT"]].generation_limit.refused()
            async with session.post(server.make_url("/stage"), data=photo) as response:
                assert response.status == 429
                assert int(response.headers["Retry-After"]) >= 1
            assert sb.stats.orders_created == 2
        assert sb.stats.processes_created == 2
        # The finished process's result came by webhook: it was never polled.
        assert sb.stats.requests["GET /v3/process/{id}"] == 2
        assert any(d.delivered for d in sb.stats.deliveries)
    assert (tmp_path / "webhooks.sqlite3").exists()
    access = "\n".join(record.getMessage() for record in caplog.records)
    assert "/hooks/***" in access
    assert token not in access


async def test_the_web_service_main_serves_and_stages_a_photo_through_it(
    sandbox: Sandbox, environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "quickstart")
    port = free_port()
    sandbox.register_webhook(f"http://127.0.0.1:{port}/hooks/{TOKEN}")
    await recipe["main"](Path(BEDROOM), port)
    accepted, finished = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"202 \{'process_id': '\S+', 'status': 'pending'\}", accepted)
    assert finished.startswith("200 {'process_id': ")
    assert "'status': 'done'" in finished
    assert sandbox.stats.requests["GET /v3/process/{id}"] == 0  # the result came by webhook
    assert (environment / "webhooks.sqlite3").exists()


def test_the_sandbox_fixture_and_chaos_recipes_pass_as_a_test_suite(tmp_path: Path) -> None:
    # Run as a user's own test files in a separate pytest, with the installed sandbox plugin.
    (tmp_path / "test_my_service.py").write_text(code_block(COOKBOOK, "sandbox-fixture"))
    (tmp_path / "test_chaos.py").write_text(code_block(COOKBOOK, "chaos"))
    # With the recipe's configuration, and nothing else, no warning is left (-W error).
    config = re.findall(r"^```toml\n(.*?)^```$", COOKBOOK.read_text(encoding="utf-8"), re.M | re.S)
    assert config == [
        '[tool.pytest.ini_options]\nasyncio_default_fixture_loop_scope = "function"\n'
    ]
    (tmp_path / "pyproject.toml").write_text(config[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASYNCSDK_", "PYTEST_"))}
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout


async def test_mask_recipes_remove_the_box(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "masks")
    photo = rgb(KITCHEN)
    white = Image.new("RGB", photo.size, "black")
    ImageDraw.Draw(white).rectangle(samples.KITCHEN_BOX, fill="white")
    white_path = tmp_path / "white-mask.png"
    white.save(white_path)
    async with sandbox.client() as client:
        by_box = await recipe["remove_by_rectangle"](client, KITCHEN, samples.KITCHEN_BOX)
        by_paint = await recipe["remove_by_painted_mask"](client, KITCHEN, white_path)
        for process in (by_box, by_paint):
            assert process.status == ProcessStatus.DONE
            result = io.BytesIO()
            await client.download(process.final_assets[0], result)
            # The cardboard box is gone: its area no longer looks like it did.
            before = ImageStat.Stat(photo.crop(samples.BOX_DRAWN)).mean
            after = ImageStat.Stat(rgb(result).crop(samples.BOX_DRAWN)).mean
            assert sum(abs(a - b) for a, b in zip(before, after, strict=True)) > 30
    share = (samples.KITCHEN_BOX[2] - samples.KITCHEN_BOX[0]) * (
        samples.KITCHEN_BOX[3] - samples.KITCHEN_BOX[1]
    )
    printed = capsys.readouterr().out
    assert printed.startswith("removing ")
    percent = float(printed.split()[1].rstrip("%"))
    assert abs(percent - 100 * share / (photo.width * photo.height)) < 0.2
    recipe["draw_mask"](KITCHEN, tmp_path / "mask.png")
    report = check_mask(tmp_path / "mask.png", KITCHEN)
    assert (report.width, report.height) == photo.size
    assert report.remove_pixels > 160 * 250  # the rectangle alone


async def test_widget_choices_and_a_misspelt_value(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = run_block(COOKBOOK, "widgets")
    async with sandbox.client() as client:
        choices = await recipe["widget_choices"](client, STAGING)
    assert {"bedroom", "living-room"} <= set(choices["space"])
    assert {"modern", "scandinavian"} <= set(choices["style"])
    monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    await recipe["main"](BEDROOM)
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("space: ") and "bedroom" in line for line in lines)
    assert "bedrom" in lines[-1]
    assert "'bedroom'" in lines[-1]
    assert sandbox.stats.orders_created == 0  # refused before the upload


def _chaos(**rule: Any) -> Callable[[Sandbox], None]:
    return lambda sb: sb.chaos.add(**rule)


def _config(**settings: Any) -> Callable[[Sandbox], None]:
    def change(sb: Sandbox) -> None:
        for name, value in settings.items():
            setattr(sb.config, name, value)

    return change


def _nothing(sb: Sandbox) -> None:
    pass


NOT_A_PHOTO = "not-a-photo.txt"
ERROR_CASES = {
    "done": (_nothing, {}, BEDROOM, WIDGETS, "done: 1 image(s)"),
    "catalogue": (_nothing, {}, BEDROOM, {"space": "bedrom", "style": "modern"}, "fix the widgets"),
    "upload": (_nothing, {}, NOT_A_PHOTO, WIDGETS, "fix the photo"),
    "validation": (_nothing, {}, BEDROOM, {"space": ""}, "fix the call"),
    "configuration": (_nothing, {"closed": True}, BEDROOM, WIDGETS, "fix the configuration"),
    "401": (_nothing, {"api_key": "sk_not_a_key"}, BEDROOM, WIDGETS, "the API key is wrong"),
    "403": (_chaos(path="/v3/process", status=403), {}, BEDROOM, WIDGETS, "your plan"),
    "429": (
        _chaos(path="/v3/order", kind="rate_limit", retry_after=120),
        {},
        BEDROOM,
        WIDGETS,
        "rate limited: try again in 120 s",
    ),
    "404": (_chaos(path="/v3/process/{id}", status=404), {}, BEDROOM, WIDGETS, "not found"),
    "400": (_chaos(path="/v3/process", status=400), {}, BEDROOM, WIDGETS, "the service refused"),
    "5xx": (
        _chaos(path="/v3/process", status=503),
        {},
        BEDROOM,
        WIDGETS,
        "the service failed (503)",
    ),
    "timeout": (
        _chaos(path="/v3/order", kind="slow", delay=2),
        {"timeout": 0.3},
        BEDROOM,
        WIDGETS,
        "the service did not answer in time",
    ),
    "connection": (
        _chaos(path="/v3/process", kind="drop_after"),
        {},
        BEDROOM,
        WIDGETS,
        "the service could not be reached",
    ),
    "decode": (
        _chaos(path="/v3/order", kind="truncated_json"),
        {},
        BEDROOM,
        WIDGETS,
        "the answer was not understood",
    ),
    "failed": (
        _config(fail_tools=frozenset({STAGING})),
        {},
        BEDROOM,
        WIDGETS,
        "the service could not process this photo",
    ),
    "wait-timeout": (
        _config(processing_delay=math.inf),
        {"wait": 0.3},
        BEDROOM,
        WIDGETS,
        "still running; check back later",
    ),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
async def test_every_error_gets_its_own_answer(case: str, sandbox: Sandbox, tmp_path: Path) -> None:
    recipe = run_block(COOKBOOK, "errors")
    setup, options, photo, widgets, expected = ERROR_CASES[case]
    if photo == NOT_A_PHOTO:
        photo = str(tmp_path / NOT_A_PHOTO)
        Path(photo).write_text("a text file\n")  # noqa: ASYNC240 - a few bytes in a tmp folder
    setup(sandbox)
    closed = options.pop("closed", False)
    wait = options.pop("wait", 600)
    client = sandbox.client(**options)
    try:
        if closed:
            await client.close()
        answer = await recipe["stage"](client, photo, widgets, timeout=wait)
    finally:
        await client.close()
    assert answer.startswith(expected), answer


async def test_the_patient_client_waits_through_503s(sandbox: Sandbox) -> None:
    recipe = run_block(COOKBOOK, "settings")
    client: asyncsdk.Client = recipe["patient_client"](
        api_key=sandbox.api_key, base_url=sandbox.base_url
    )
    async with client:
        assert client.settings.timeout == asyncsdk.Timeout(connect=5, total=120)
        assert client.settings.retry == asyncsdk.RetryPolicy(
            max_retries=5, backoff_initial=1.0, backoff_max=20.0, max_retry_after=30.0
        )
        assert client.settings.min_poll_interval == 10.0
        order = await client.orders.create(BEDROOM)
        sandbox.chaos.add(method="GET", path="/v3/order/{id}", status=503, times=1)
        sandbox.chaos.add(method="GET", path="/v3/order/{id}", kind="slow", delay=0.2, times=1)
        assert await recipe["order_status"](client, order.order_id) == "idle"
    assert sandbox.stats.chaos_fired == {"status": 1, "slow": 1}
