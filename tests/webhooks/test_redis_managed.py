"""The Redis backends on a server run as managed services run it: TLS only, with a certificate
from a CA made for the test, ``CONFIG`` renamed away, and an ACL user limited to the commands and
key pattern that docs/webhooks.md lists (the rule is read from the page, so the two cannot drift).

One server for the module (``own_servers.OwnRedis``); the inbox and registry contract suites run
on it as the ACL user, then a receiver, a keyed run's journal and ``asyncsdk inbox stats`` do,
and the user's password is looked for in every log line, error, metric and output.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import own_servers
import pytest
import redis
from codeblocks import ROOT
from inbox_contract import (
    CLAIM_TIMEOUT,
    ClaimingInboxContract,
    OpenInbox,
    SharedInboxContract,
)
from registry_contract import MakeRegistry, RegistryContract, registries
from whtools import HOOK, JSON, TOKEN, encode, inbox_stats, payload, serve, wait_until

from asyncsdk import ConfigurationError, ProcessCompleted, RedisJournal, ToolSlug
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox
from webhooks import (
    Inbox,
    ReceiverTelemetry,
    RedisInbox,
    RedisRegistry,
    RedisWrites,
    RegistryClosedError,
    TokenVerifier,
    WebhookReceiver,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

USER = "webhooks"
PASSWORD = "pw-" + secrets.token_hex(16)
PREFIX = "managed:"


def documented_rule() -> str:
    """The ``ACL SETUSER`` line of docs/webhooks.md, for the prefix of these tests."""
    page = (ROOT / "docs" / "webhooks.md").read_text()
    block = re.search(r"<!-- redis-acl -->\n```text\n(ACL SETUSER [^\n]+)\n```", page)
    assert block is not None, "docs/webhooks.md lost its ACL rule"
    return block[1].replace("asyncsdk:", PREFIX)


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[own_servers.OwnRedis]:
    """The server, with the documented ACL user made on it by the default (admin) user."""
    directory = tmp_path_factory.mktemp("managed-redis")
    tls = own_servers.TestCertificates(directory / "tls")
    no_config = ("--rename-command", "CONFIG", "")
    with own_servers.own_redis(directory / "redis", "everysec", no_config, tls) as server:
        admin = redis.Redis.from_url(server.url)
        try:
            admin.execute_command(*documented_rule().replace(">PASSWORD", f">{PASSWORD}").split())
        finally:
            admin.close()
        yield server


@pytest.fixture
def url(managed: own_servers.OwnRedis) -> str:
    """The ACL user's URL: ``rediss://`` with the password and the test CA."""
    return managed.url.replace("rediss://", f"rediss://{USER}:{PASSWORD}@", 1)


@pytest.fixture
def prefix() -> str:
    return f"{PREFIX}{uuid.uuid4().hex}:"


class TestInboxOnManagedRedis(ClaimingInboxContract):
    @pytest.fixture
    async def inbox(self, url: str, prefix: str) -> AsyncIterator[Inbox]:
        inbox = RedisInbox(url, prefix=prefix, claim_timeout=CLAIM_TIMEOUT)
        yield inbox
        await inbox.close()


class TestSharedInboxOnManagedRedis(SharedInboxContract):
    @pytest.fixture
    async def open_inbox(self, url: str, prefix: str) -> AsyncIterator[OpenInbox]:
        opened: list[RedisInbox] = []

        def open_inbox() -> RedisInbox:
            opened.append(RedisInbox(url, prefix=prefix, claim_timeout=CLAIM_TIMEOUT))
            return opened[-1]

        yield open_inbox
        for inbox in opened:
            await inbox.close()


class TestRegistryOnManagedRedis(RegistryContract):
    @pytest.fixture
    async def make_registry(self, url: str, prefix: str) -> AsyncIterator[MakeRegistry]:
        async with registries(functools.partial(RedisRegistry, url, prefix=prefix)) as make:
            yield make


def open_sockets_to(port: int) -> set[int]:
    """The local ports of this machine's TCP sockets to 127.0.0.1:``port`` that are still open
    on the connecting side (established, or closed by the server and not yet by the client)."""
    still_open = {"01", "08"}  # ESTABLISHED, CLOSE_WAIT
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    ports = set()
    for line in lines:
        local, remote, state = line.split()[1:4]
        if int(remote.split(":")[1], 16) == port and state in still_open:
            ports.add(int(local.split(":")[1], 16))
    return ports


async def test_a_closed_registry_has_closed_its_subscription(
    managed: own_servers.OwnRedis, url: str, prefix: str
) -> None:
    """Closing a TLS connection takes a round trip with the server; ``close()`` returns after
    it, so an application that ends its event loop then leaves no socket open."""
    before = open_sockets_to(managed.port)
    registry = RedisRegistry(url, prefix=prefix)
    await registry.start(timeout=5)
    waiter = asyncio.create_task(registry.wait("p-1"))  # pending, as at an app's shutdown
    await asyncio.sleep(0.01)
    assert open_sockets_to(managed.port) - before
    await registry.close()
    with pytest.raises(RegistryClosedError):
        await waiter
    assert open_sockets_to(managed.port) - before == set()


async def test_a_receiver_journal_and_stats_run_as_the_acl_user_and_never_show_its_password(
    url: str, prefix: str, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = WebhookReceiver.from_redis(
        url,
        prefix=prefix,
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        telemetry=ReceiverTelemetry(metrics=True),
        metrics_route=True,
        metrics_token="scrape-" + "m" * 24,
    )
    handled: list[str] = []

    @receiver.on_completed(atomic=True)
    async def record(event: ProcessCompleted, writes: RedisWrites) -> None:
        writes.call("SET", f"{prefix}seen:{event.process_id}", "1")
        handled.append(event.process_id)

    shown: list[str] = []
    async with serve(receiver) as client:
        for n in range(20):
            answer = await client.post(HOOK, data=encode(payload(f"p-{n}")), headers=JSON)
            assert answer.status == 200, await answer.text()
        await wait_until(lambda: len(handled) == 20, "every delivery handled")
        scrape = await client.get(
            "/hooks/metrics", headers={"Authorization": "Bearer scrape-" + "m" * 24}
        )
        assert scrape.status == 200
        shown.append(await scrape.text())

    journal = RedisJournal.connect(url, prefix=prefix)
    try:
        async with sandbox.client(journal=journal) as client:
            widgets = {"space": "bedroom", "style": "modern"}
            room = sample("bedroom-empty.jpg")
            first = await client.run(ToolSlug.VIRTUAL_STAGING, room, widgets=widgets, key="k")
            again = await client.run(ToolSlug.VIRTUAL_STAGING, room, widgets=widgets, key="k")
        assert again.id == first.id
        assert sandbox.stats.processes_created == 1
    finally:
        await journal.close()

    stats, printed = await inbox_stats("--redis", url, "--prefix", prefix)
    assert stats["unfinished"] == "0"
    assert stats["durability"].startswith("appendonly yes, appendfsync unknown (CONFIG GET refused")
    shown.append(printed)
    shown += [record.getMessage() for record in caplog.records]
    shown += [repr(receiver), repr(journal)]
    assert not [text for text in shown if PASSWORD in text]


async def test_a_wrong_password_is_refused_at_start_without_showing_it(
    url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-" + secrets.token_hex(8)
    receiver = WebhookReceiver.from_redis(
        url.replace(PASSWORD, wrong), prefix=prefix, verifier=TokenVerifier(TOKEN)
    )
    with pytest.raises(ConfigurationError) as refused:
        async with serve(receiver):
            raise AssertionError("the receiver started with a wrong password")
    await receiver.stop()
    registry = RedisRegistry(url.replace(PASSWORD, wrong), prefix=prefix)
    with pytest.raises(ConfigurationError) as registry_refused:
        await registry.start(timeout=5)
    await registry.close()
    texts = [str(refused.value), repr(refused.value), *(r.getMessage() for r in caplog.records)]
    texts += [str(registry_refused.value)]
    assert "refused the user name or password of its URL" in str(refused.value)
    assert "refused the user name or password of its URL" in str(registry_refused.value)
    assert not [text for text in texts if wrong in text or PASSWORD in text]


def test_the_rule_gives_no_admin_command() -> None:
    rule = documented_rule()
    assert " -@all " in rule
    assert not re.search(r"\+(config|flushall|flushdb|keys|debug|shutdown|acl)\b", rule)
    assert "~managed:* " in rule
    assert "&managed:* " in rule


def test_the_ca_is_needed(managed: own_servers.OwnRedis, url: str) -> None:
    """Without the test's CA the server's certificate is refused: the URL's ``ssl_ca_certs`` is
    what makes the TLS above verified, not a client that trusts anything."""
    untrusting = redis.Redis.from_url(url.split("?", 1)[0], socket_connect_timeout=2)
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        untrusting.ping()
    untrusting.close()


def test_the_server_listens_for_tls_only(managed: own_servers.OwnRedis, tmp_path: Path) -> None:
    plain = redis.Redis(port=managed.port, socket_connect_timeout=2, socket_timeout=2)
    with pytest.raises(redis.ConnectionError):
        plain.ping()
    plain.close()
