"""A webhook URL the sandbox cannot deliver to is refused when given, with the way to write it;
every failed delivery attempt is told in one line (what went wrong, the URL with its token
masked, the next try or giving up)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator

import aiohttp
import own_servers
import pytest
from aiohttp import web

import asyncsdk
from asyncsdk import samples
from asyncsdk.cli import main as cli_main
from asyncsdk.sandbox import Sandbox, SandboxConfig
from asyncsdk.sandbox import main as sandbox_main

from .test_cockpit import TOKEN, WRONG, receiver

#: (what is given, what the message says), the message starting with the URL.
BAD_URLS = [
    (
        "127.0.0.1:8081/hooks/x",
        "127.0.0.1:8081/hooks/x has no scheme: write http://127.0.0.1:8081/hooks/x",
    ),
    ("//127.0.0.1:8081/hooks/x", "has no scheme: write http://127.0.0.1:8081/hooks/x"),
    (
        "ftp://127.0.0.1/hooks/x",
        "has the scheme ftp: a webhook goes over http or https, as in http://127.0.0.1/hooks/x",
    ),
    (
        "http:///hooks/x",
        "http:///hooks/x has no host: write it as http://127.0.0.1:8081/hooks/TOKEN",
    ),
    ("http://127.0.0.1:99999/hooks/x", "has no valid port: a port is 1 to 65535"),
    ("http://127.0.0.1:eighty/hooks/x", "has no valid port: a port is 1 to 65535"),
    ("http://127.0.0.1:0/hooks/x", "has port 0: name the receiver's port"),
]


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
def test_the_command_line_refuses_a_webhook_url_it_cannot_deliver_to(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``python -m asyncsdk.sandbox`` (argparse exits) and ``asyncsdk sandbox`` (returns 2)
    with pytest.raises(SystemExit) as stopped:
        sandbox_main(["--webhook", url])
    codes = [stopped.value.code, cli_main(["sandbox", "--webhook", url])]
    assert codes == [2, 2]
    errors = capsys.readouterr().err.split("usage:")[1:]
    assert len(errors) == 2
    for err in errors:
        assert f"argument --webhook: {url} " in err
        assert message in err


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
def test_settings_and_registration_refuse_the_same_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match="webhook URL ") as refused:
        SandboxConfig(webhook_urls=(url,))
    assert message in str(refused.value)
    config = SandboxConfig()
    with pytest.raises(ValueError, match="webhook URL"):
        config.update({"webhook_urls": [url]})
    assert config.webhook_urls == ()


async def test_the_control_route_refuses_a_url_without_scheme(sandbox: Sandbox) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{sandbox.base_url}/_sandbox/webhooks", json={"url": "127.0.0.1:8081/hooks/x"}
        ) as answer,
    ):
        assert answer.status == 400
        body = await answer.json()
    assert "has no scheme: write http://127.0.0.1:8081/hooks/x" in body["error"]
    with pytest.raises(ValueError, match=r"has no scheme: write http://127\.0\.0\.1:8081/hooks/x"):
        sandbox.register_webhook("127.0.0.1:8081/hooks/x")


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "asyncsdk.sandbox" and r.levelno == logging.WARNING
    ]


async def test_each_failed_attempt_is_told_in_one_line_with_the_token_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncsdk.sandbox")
    async with receiver() as base:
        config = SandboxConfig(
            webhook_urls=(f"{base}/hooks/{TOKEN}", f"{base}/hooks/{WRONG}"),
            webhook_retry_base=0.01,
            webhook_max_attempts=3,
        )
        async with Sandbox(config) as sb, sb.client() as client:
            process = await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
            await sb.wait_idle()
    lines = failure_lines(caplog)
    assert len(lines) == 3  # the 401 receiver's three attempts; the 200 one is not told
    for number, line in enumerate(lines, start=1):
        assert line.startswith("webhook delivery failed: HTTP 401 {")
        assert '"unknown webhook token"' in line
        assert f"{base}/hooks/wron***" in line
        assert WRONG not in line
        assert f"process {process.id}, attempt {number} of 3" in line
    assert "; next try in 0.01 s (at " in lines[0]
    assert "; next try in 0.02 s (at " in lines[1]
    assert lines[2].endswith("; giving up after 3 attempts")


async def test_a_refused_connection_is_told_with_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncsdk.sandbox")
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = SandboxConfig(
        webhook_urls=(f"http://127.0.0.1:{port}/hooks/{TOKEN}",),
        webhook_retry_base=0.01,
        webhook_max_attempts=2,
    )
    async with Sandbox(config) as sb, sb.client() as client:
        await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
        await sb.wait_idle()
        delivery = sb.stats.deliveries[0]
    lines = failure_lines(caplog)
    assert len(lines) == 2
    assert lines[0].startswith(
        f"webhook delivery failed: connection refused: nothing listens on 127.0.0.1:{port}; "
        f"is the receiver running? from http://127.0.0.1:{port}/hooks/s3cr*** "
    )
    assert lines[1].endswith("giving up after 2 attempts")
    assert [a.status for a in delivery.history] == [None, None]
    assert delivery.finished
    assert not delivery.delivered


async def test_https_to_a_plain_http_receiver_is_told_with_the_url_to_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncsdk.sandbox")
    async with receiver() as base:
        https = base.replace("http://", "https://")
        config = SandboxConfig(webhook_urls=(f"{https}/hooks/{TOKEN}",), webhook_max_attempts=1)
        async with Sandbox(config) as sb, sb.client() as client:
            await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
            await sb.wait_idle()
    [line] = failure_lines(caplog)
    assert line.startswith("webhook delivery failed: no TLS answer (")
    assert (
        f"if the receiver is plain http, write {base}/hooks/s3cr*** from {https}/hooks/s3cr***"
        in line
    )
    assert TOKEN not in line
    assert line.endswith("giving up after 1 attempt")


async def line_with(stream: asyncio.StreamReader | None, text: str) -> str:
    """The next line of ``stream`` holding ``text`` (within 30 s)."""
    assert stream is not None
    async with asyncio.timeout(30):
        while line := (await stream.readline()).decode():
            if text in line:
                return line.rstrip("\n")
    raise AssertionError(f"the stream ended without a line holding {text!r}")


async def test_a_failed_delivery_shows_on_stderr_with_its_token_masked() -> None:
    async with receiver() as base:
        url = f"{base}/hooks/{WRONG}"
        child = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "asyncsdk", "sandbox", "--port", "0"],
            *["--pending-delay", "0", "--processing-delay", "0"],
            *["--webhook", url, "--webhook-retries", "5", "--webhook-retry-base", "0.05"],
            env={k: v for k, v in os.environ.items() if not k.startswith("ASYNCSDK_")},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            serving = await line_with(child.stdout, "sandbox serving on ")
            sandbox = serving.removeprefix("sandbox serving on ")
            async with asyncsdk.Client(
                api_key="sk_sandbox_enterprise",
                base_url=sandbox,
                app_url=sandbox,
                min_poll_interval=0.05,
            ) as client:
                await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
            # Five attempts, 0.05 s to 0.4 s apart, as the flags ask.
            lines = [await line_with(child.stderr, "webhook delivery failed") for _ in range(5)]
        finally:
            child.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(child.communicate(), 30)
    assert f"processes and webhook deliveries, live: {sandbox}/_sandbox/" in out.decode()
    assert "webhook delivery failed" not in err.decode()  # no sixth line
    told = f'HTTP 401 {{"error": "unknown webhook token"}} from {base}/hooks/wron*** '
    assert all(told in line for line in lines)
    assert not any(WRONG in line for line in lines)
    assert "attempt 1 of 5); next try in 0.05 s" in lines[0]
    assert lines[-1].endswith("attempt 5 of 5); giving up after 5 attempts")


class LateReceiver:
    """A webhook receiver on a free port where nothing listens until :meth:`listening`, so the
    sandbox's deliveries to ``url`` are refused until then; ``got``: the events it received."""

    def __init__(self) -> None:
        self.port = own_servers.free_port()
        self.url = f"http://127.0.0.1:{self.port}/hooks/{TOKEN}"
        self.got: list[dict[str, object]] = []
        self.arrived = asyncio.Event()
        app = web.Application()
        app.router.add_post("/hooks/{token}", self._hook)
        self._runner = web.AppRunner(app, access_log=None)

    async def _hook(self, request: web.Request) -> web.Response:
        self.got.append(await request.json())
        self.arrived.set()
        return web.json_response({"accepted": True})

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
            yield
        finally:
            await self._runner.cleanup()


@pytest.mark.slow
async def test_a_receiver_started_late_gets_its_event_from_the_command_lines_schedule() -> None:
    late = LateReceiver()
    child = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "asyncsdk", "sandbox", "--port", "0"],
        *["--pending-delay", "0", "--processing-delay", "0"],
        *["--webhook", late.url],
        env={k: v for k, v in os.environ.items() if not k.startswith("ASYNCSDK_")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        serving = await line_with(child.stdout, "sandbox serving on ")
        sandbox = serving.removeprefix("sandbox serving on ")
        async with aiohttp.ClientSession() as s, s.get(f"{sandbox}/_sandbox/config") as r:
            settings = await r.json()
        # The default schedule waits base * 2**(n-1) after each of the first attempts - 1.
        waits = [
            settings["webhook_retry_base"] * 2**n
            for n in range(settings["webhook_max_attempts"] - 1)
        ]
        assert sum(waits) >= 60
        async with asyncsdk.Client(
            api_key="sk_sandbox_enterprise", base_url=sandbox, app_url=sandbox
        ) as client:
            process = await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
        await line_with(child.stderr, "connection refused")
        await asyncio.sleep(20)  # the receiver starts 20 s late: the old schedule gave up after 1 s
        async with late.listening():
            await asyncio.wait_for(late.arrived.wait(), 60)  # due 31.5 s after the first attempt
    finally:
        child.send_signal(signal.SIGTERM)
        await asyncio.wait_for(child.communicate(), 30)
    assert [event["process_id"] for event in late.got] == [process.id]


async def test_a_given_up_delivery_is_resent_from_the_page_once_the_receiver_is_up() -> None:
    late = LateReceiver()
    config = SandboxConfig(
        webhook_urls=(late.url,),
        webhook_retry_base=0.01,
        webhook_max_attempts=2,
    )
    async with Sandbox(config) as sb, aiohttp.ClientSession(base_url=sb.base_url) as s:
        async with asyncsdk.Client(api_key=sb.api_key, base_url=sb.base_url) as client:
            process = await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
        await sb.wait_idle()
        [given_up] = sb.stats.deliveries
        assert given_up.finished
        assert not given_up.delivered
        async with s.get("/_sandbox/") as page:
            assert f'action="/_sandbox/deliveries/{given_up.id}/resend"' in await page.text()
        async with late.listening():
            async with s.post(  # as the page's form posts it: a form body, the page's Origin
                f"/_sandbox/deliveries/{given_up.id}/resend",
                data={},
                headers={"Origin": sb.base_url},
                allow_redirects=False,
            ) as r:
                assert r.status == 303
            await sb.wait_idle()
    assert given_up.delivered
    # Two given-up attempts, then the resent one, numbered from 1 again.
    assert [a.number for a in given_up.history] == [1, 2, 1]
    assert [event["process_id"] for event in late.got] == [process.id]


async def test_the_command_line_resends_every_given_up_delivery(
    capsys: pytest.CaptureFixture[str],
) -> None:
    late = LateReceiver()
    config = SandboxConfig(
        webhook_urls=(late.url,),
        webhook_retry_base=0.01,
        webhook_max_attempts=1,
    )
    async with Sandbox(config) as sb:
        async with asyncsdk.Client(api_key=sb.api_key, base_url=sb.base_url) as client:
            process = await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
        await sb.wait_idle()
        [given_up] = sb.stats.deliveries
        assert not given_up.delivered
        async with late.listening():
            # The command runs its own event loop: run it beside this one.
            argv = ["sandbox", "resend", "--url", sb.base_url, "--all-failed"]
            assert await asyncio.to_thread(cli_main, argv) == 0
            await sb.wait_idle()
    assert (
        f"resending {given_up.id} to http://127.0.0.1:{late.port}/hooks/" in capsys.readouterr().out
    )
    assert given_up.delivered
    assert [event["process_id"] for event in late.got] == [process.id]
