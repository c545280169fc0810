"""What the Redis inbox promises about a crash of the Redis host, stated at start and enforced.

Each test runs its own ``redis-server`` (``own_servers.OwnRedis``): it is killed, restarted,
reconfigured and its append-only file cut, which the shared server must never be.

- At start the inbox logs one line naming the server's persistence and what a host crash loses.
- ``durability="strict"`` is refused on a server that does not fsync each write, naming the fix;
  on one with ``appendfsync always`` every delivery answered 2xx is in the append-only file when
  the answer arrives, and survives the server's SIGKILL; with ``replicas=1`` a delivery is
  answered 2xx only when a replica holds it.
- With the default durability, a Redis restarted from an append-only file cut back by its last
  writes (a host crash under ``appendfsync everysec``) is found by the running receiver: an error
  line and ``asyncsdk inbox stats`` say how many acknowledged deliveries were lost.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import attrs
import own_servers
import pytest
import redis.asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient
from inbox_contract import event
from own_servers import OwnRedis
from whtools import (
    HOOK,
    JSON,
    TOKEN,
    encode,
    eventually,
    inbox_stats,
    payload,
    serve,
    wait_until,
)

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import InboxUnavailableError, RedisInbox, TokenVerifier, WebhookReceiver

pytestmark = [pytest.mark.slow]

PREFIX = "durability:"


@pytest.fixture(name="own_redis")
def own_redis_fixture(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OwnRedis]:
    """A server of this test's own; ``@pytest.mark.parametrize("own_redis", [...], indirect=True)``
    names its ``appendfsync``."""
    with own_servers.own_redis(tmp_path / "redis", getattr(request, "param", "everysec")) as server:
        yield server


def start_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Redis persistence at" in r.getMessage()]


async def checked(inbox: RedisInbox) -> None:
    try:
        await inbox.check()
    finally:
        await inbox.close()


# -- the line at start -------------------------------------------------------------------------


async def test_the_start_line_names_the_window_of_appendfsync_everysec(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="webhooks")
    await checked(RedisInbox(own_redis.url, prefix=PREFIX))
    (line,) = start_lines(caplog)
    assert f"Redis persistence at 127.0.0.1:{own_redis.port}/0 (Redis 7." in line
    assert (
        "appendonly yes, appendfsync everysec: a host crash can lose up to about 1 s of"
        " acknowledged deliveries; durability='relaxed': a loss is found and logged" in line
    )


@pytest.mark.parametrize("own_redis", ["always"], indirect=True)
async def test_the_start_line_of_appendfsync_always_says_nothing_is_lost(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="webhooks")
    await checked(RedisInbox(own_redis.url, prefix=PREFIX))
    await checked(RedisInbox(own_redis.url, prefix=PREFIX, durability="strict"))
    relaxed, strict = start_lines(caplog)
    assert "appendonly yes, appendfsync always: a host crash loses nothing acknowledged" in relaxed
    assert strict.endswith(
        "appendonly yes, appendfsync always: durability='strict': each write is fsynced before"
        " Redis answers it, so a host crash loses nothing acknowledged"
    )


async def test_the_start_line_without_an_append_only_file_names_what_a_restart_loses(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    admin = redis.asyncio.Redis.from_url(own_redis.url)
    await admin.config_set("appendonly", "no")
    caplog.set_level(logging.INFO, logger="webhooks")
    await checked(RedisInbox(own_redis.url, prefix=PREFIX))
    await admin.config_set("save", "3600 1")
    await checked(RedisInbox(own_redis.url, prefix=PREFIX))
    await admin.aclose()
    nothing, snapshots = start_lines(caplog)
    assert (
        "appendonly no, RDB save '': a restart of Redis loses every acknowledged delivery since"
        " it started" in nothing
    )
    assert (
        "appendonly no, RDB save '3600 1': a host crash can lose every acknowledged delivery"
        " since the last RDB snapshot" in snapshots
    )


async def test_stats_read_the_servers_persistence_at_most_every_30_s(own_redis: OwnRedis) -> None:
    """A node reads its figures every 2 s: ``INFO`` and ``CONFIG GET`` go with the first read
    only; what the durability says is that read's."""
    admin = redis.asyncio.Redis.from_url(own_redis.url)
    inbox = RedisInbox(own_redis.url, prefix=PREFIX)
    try:
        first = await inbox.stats()
        calls = await admin.info("commandstats")
        await admin.config_set("appendfsync", "always")
        for _ in range(5):
            assert (await inbox.stats()).durability == first.durability
        again = await admin.info("commandstats")
        for command in ("cmdstat_info", "cmdstat_config|get"):
            # the admin's own INFO commandstats is the one more INFO
            assert again[command]["calls"] - calls[command]["calls"] <= 1, command
        assert "appendfsync everysec" in first.durability
    finally:
        await inbox.close()
        await admin.aclose()


async def test_a_server_refusing_config_is_read_from_info_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A managed Redis may refuse CONFIG: here it is renamed away, as some providers do."""
    with own_servers.own_redis(
        tmp_path / "redis", "everysec", ("--rename-command", "CONFIG", "")
    ) as server:
        caplog.set_level(logging.INFO, logger="webhooks")
        await checked(RedisInbox(server.url, prefix=PREFIX))
        (line,) = start_lines(caplog)
        assert "appendonly yes, appendfsync unknown (CONFIG GET refused: unknown command" in line
        assert (
            "a host crash can lose up to about 1 s of acknowledged deliveries with appendfsync"
            " everysec (the default), nothing with always" in line
        )
        # Strict mode cannot tell that each write is fsynced: refused, saying why and naming
        # only what such a server allows (no CONFIG SET).
        with pytest.raises(ConfigurationError, match="CONFIG GET refused") as refused:
            await checked(RedisInbox(server.url, prefix=PREFIX, durability="strict"))
        message = str(refused.value)
        assert "CONFIG SET" not in message
        assert "pass replicas=N to wait for N replicas with WAIT" in message
        assert "use Redis 7.2+ with the append-only file on, where WAITAOF waits" in message


async def test_a_cluster_is_refused_at_start_naming_what_to_use(tmp_path: Path) -> None:
    cluster = ("--cluster-enabled", "yes", "--cluster-config-file", str(tmp_path / "nodes.conf"))
    # The bus port is named: by default it is the port + 10000, which a free port above 55535
    # would push past 65535, and the server would refuse to start.
    cluster += ("--cluster-port", str(own_servers.free_port()))
    with own_servers.own_redis(tmp_path / "redis", "everysec", cluster) as server:
        receiver = WebhookReceiver.from_redis(
            server.url, prefix=PREFIX, verifier=TokenVerifier(TOKEN)
        )
        with pytest.raises(ConfigurationError) as refused:
            async with serve(receiver):
                raise AssertionError("the receiver started on a Redis cluster")
        await receiver.stop()
    message = str(refused.value)
    assert f"Redis at 127.0.0.1:{server.port}/0 runs in cluster mode" in message
    assert "Use a standalone Redis (with replicas for failover" in message


async def test_strict_mode_with_replicas_needs_no_config(tmp_path: Path) -> None:
    """On a server that refuses CONFIG, ``replicas=1`` makes strict mode work: each put is
    confirmed by ``WAIT``, which needs no admin command."""
    no_config = ("--rename-command", "CONFIG", "")
    with own_servers.own_redis(tmp_path / "primary", "everysec", no_config) as primary:
        inbox = RedisInbox(primary.url, prefix=PREFIX, durability="strict", replicas=1)
        try:
            await inbox.check()
            with pytest.raises(InboxUnavailableError, match="only 0 of 1 replicas"):
                await inbox.put(event("alone"), b"{}")
            follow = ("--replicaof", "127.0.0.1", str(primary.port), *no_config)
            with own_servers.own_redis(tmp_path / "replica", "everysec", follow) as replica:
                reader = redis.asyncio.Redis.from_url(replica.url)
                try:
                    await eventually(lambda: _linked(reader), "the replica to sync", limit=30)
                    assert await inbox.put(event("replicated"), b"{}") is True
                finally:
                    await reader.aclose()
        finally:
            await inbox.close()


# -- strict mode -------------------------------------------------------------------------------


def strict_receiver(url: str, **options: object) -> WebhookReceiver:
    return WebhookReceiver.from_redis(
        url,
        prefix=PREFIX,
        verifier=TokenVerifier(TOKEN),
        durability="strict",
        poll_interval=0.05,
        **options,  # type: ignore[arg-type]
    )


async def test_strict_mode_refuses_to_start_on_appendfsync_everysec_naming_the_fix(
    own_redis: OwnRedis,
) -> None:
    receiver = strict_receiver(own_redis.url)
    with pytest.raises(ConfigurationError) as refused:
        async with serve(receiver):
            raise AssertionError("the receiver started on a server that does not fsync each write")
    await receiver.stop()  # closes the connections it opened: it never started
    message = str(refused.value)
    assert "durability='strict' needs Redis at 127.0.0.1:" in message
    assert "appendonly yes, appendfsync everysec" in message
    assert "run `CONFIG SET appendfsync always` on it" in message
    assert "or pass replicas=N to wait for N replicas with WAIT" in message


@pytest.mark.parametrize("own_redis", ["always"], indirect=True)
async def test_strict_mode_answers_2xx_only_once_the_write_is_in_the_append_only_file(
    own_redis: OwnRedis,
) -> None:
    """With ``appendfsync always`` Redis writes and fsyncs the append-only file before it
    answers a write; the test sees the write in the file when the 2xx arrives, and every
    delivery answered 2xx still there after a SIGKILL of the server (a duplicate then)."""
    receiver = strict_receiver(own_redis.url)
    answered: list[str] = []
    async with serve(receiver) as client:
        for n in range(40):
            pid = f"strict-{n}"
            answer = await client.post(HOOK, data=encode(payload(pid)), headers=JSON)
            assert answer.status == 200
            quoted = f'"{pid}"'.encode()  # as in the stored body and dedup key
            assert quoted in own_redis.aof_bytes(), f"{pid} answered before its write"
            answered.append(pid)
        own_redis.kill()
        own_redis.start()
        for pid in answered:
            assert await sent(client, pid) == "duplicate", pid


async def test_a_strict_put_before_any_check_is_refused_and_stores_nothing(
    own_redis: OwnRedis,
) -> None:
    """Without the receiver's start (``check()``), the first put reads the server first."""
    inbox = RedisInbox(own_redis.url, prefix=PREFIX, durability="strict")
    try:
        with pytest.raises(ConfigurationError, match="CONFIG SET appendfsync always"):
            await inbox.put(event("p-1"), b"{}")
        assert (await inbox.stats()).depth == 0
        admin = redis.asyncio.Redis.from_url(own_redis.url)
        await admin.config_set("appendfsync", "always")
        await admin.aclose()
        assert await inbox.put(event("p-1"), b"{}") is True  # read again, accepted now
        assert (await inbox.stats()).depth == 1
    finally:
        await inbox.close()


@pytest.mark.parametrize("own_redis", ["always"], indirect=True)
async def test_strict_mode_stops_answering_2xx_when_the_server_stops_fsyncing_each_write(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``CONFIG SET`` after the start (or a restart with another redis.conf) does not weaken
    the promise unseen: the deliveries are answered 503 until the server fsyncs again."""
    receiver = strict_receiver(own_redis.url)
    admin = redis.asyncio.Redis.from_url(own_redis.url)
    try:
        async with serve(receiver) as client:
            assert await sent(client, "before") == "accepted"
            await admin.config_set("appendfsync", "everysec")
            weak = await client.post(HOOK, data=encode(payload("during")), headers=JSON)
            assert weak.status == 503
            (line,) = [
                r.getMessage() for r in caplog.records if "no longer fsyncs" in r.getMessage()
            ]
            assert "(appendfsync everysec, appendonly yes): run `CONFIG SET appendonly yes`" in line
            assert "`CONFIG SET appendfsync always`" in line
            await admin.config_set("appendfsync", "always")
            # The sender's retry is answered now, as stored once (the write made while the
            # server did not fsync is on disk with the next fsync, before this answer).
            assert await sent(client, "during") == "duplicate"
    finally:
        await admin.aclose()


@pytest.mark.parametrize("own_redis", ["always"], indirect=True)
async def test_puts_answered_503_then_lost_by_a_restart_are_not_reported_as_a_loss(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """Strict mode, then ``appendfsync everysec`` at runtime: the puts are refused (503), yet
    their entries count in Redis' sequence.  A restart that loses them lost nothing anyone was
    answered 2xx for: no error line, and ``stats()`` counts no loss, on either node."""
    nodes = [RedisInbox(own_redis.url, prefix=PREFIX, durability="strict") for _ in range(2)]
    admin = redis.asyncio.Redis.from_url(own_redis.url)
    try:
        for node in nodes:
            await node.check()
        for n in range(5):
            assert await nodes[n % 2].put(event(f"kept-{n}"), b"{}") is True
        (aof,) = own_redis.aof_files()
        fsynced = aof.stat().st_size  # appendfsync always: all of it is on disk

        await admin.config_set("appendfsync", "everysec")
        for n in range(10):
            with pytest.raises(InboxUnavailableError, match="no longer fsyncs"):
                await nodes[n % 2].put(event(f"refused-{n}"), b"{}")
        for node in nodes:  # each claim also reads the sequence, refused puts counted in it
            await node.claim_batch(f"c-{id(node)}", 100)

        own_redis.kill()
        own_redis.cut_aof(fsynced)  # a host crash before the refused puts reached the disk
        own_redis.start()
        for round_ in range(3):  # puts and claims after the restart compare the nodes' marks
            for index, node in enumerate(nodes):
                pid = f"after-{round_}-{index}"
                await eventually(functools.partial(_put_and_claim, node, pid), "a put and claim")
        assert (await nodes[0].stats()).lost == 0
    finally:
        await admin.aclose()
        for node in nodes:
            await node.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [m for m in errors if "acknowledged" in m], errors


async def _claimed(inbox: RedisInbox) -> bool:
    """A claim, or ``False`` while the restarted server still refuses it."""
    try:
        await inbox.claim_batch(f"c-{id(inbox)}", 100)
    except InboxUnavailableError:
        return False
    return True


async def _put_and_claim(inbox: RedisInbox, pid: str) -> bool:
    """A put and a claim, or ``False`` while the restarted server still refuses them (the
    connections of the pool were reset by its restart)."""
    try:
        await inbox.put(event(pid), b"{}")
        await inbox.claim_batch(f"c-{id(inbox)}", 100)
    except InboxUnavailableError:
        return False
    return True


async def sent(client: TestClient[web.Request, web.Application], pid: str) -> str:
    """Deliver ``pid`` as the service does, again after each 503; the 2xx answer's status."""

    async def answered() -> str | None:
        answer = await client.post(HOOK, data=encode(payload(pid)), headers=JSON)
        if answer.status == 503:
            return None
        assert answer.status == 200, await answer.text()
        status: str = (await answer.json())["status"]
        return status

    return await eventually(answered, f"a 2xx for {pid}", limit=20, step=0.05)


async def test_strict_mode_with_replicas_answers_2xx_only_once_a_replica_holds_the_write(
    own_redis: OwnRedis, tmp_path: Path
) -> None:
    receiver = strict_receiver(own_redis.url, replicas=1, put_timeout=5.0)
    async with serve(receiver) as client:
        # No replica: WAIT 1 gets none within replica_timeout, so the sender gets 503 and retries.
        lonely = await client.post(HOOK, data=encode(payload("lonely")), headers=JSON)
        assert lonely.status == 503

        primary = ("--replicaof", "127.0.0.1", str(own_redis.port))
        with own_servers.own_redis(tmp_path / "replica", "everysec", primary) as replica:
            reader = redis.asyncio.Redis.from_url(replica.url)
            try:
                await eventually(
                    lambda: _linked(reader), "the replica to sync with its primary", limit=30
                )
                for n in range(10):
                    pid = f"replicated-{n}"
                    answer = await client.post(HOOK, data=encode(payload(pid)), headers=JSON)
                    assert answer.status == 200
                    keys = [k async for k in reader.scan_iter(match=f"{PREFIX}inbox:dedup:*")]
                    assert any(pid.encode() in key for key in keys), f"{pid} not on the replica"
                # The sender's retry of the first delivery is stored once, and answered 2xx now.
                assert await sent(client, "lonely") == "duplicate"
            finally:
                await reader.aclose()


async def _linked(replica: redis.asyncio.Redis) -> bool:
    info = await replica.info("replication")
    return info.get("master_link_status") == "up"


# -- default durability: a loss is found and said ---------------------------------------------


async def test_a_restart_from_a_cut_append_only_file_is_logged_and_counted(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A host crash under ``appendfsync everysec`` loses the writes of the last second: here the
    append-only file is cut back to what it held before the last 15 deliveries (as a crash would
    leave it), then Redis restarts from it while the receiver runs on."""
    caplog.set_level(logging.INFO, logger="webhooks")
    handled: list[str] = []
    receiver = WebhookReceiver(
        inbox=RedisInbox(own_redis.url, prefix=PREFIX),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
    )

    @receiver.on_completed()
    async def record(event: ProcessCompleted) -> None:
        handled.append(event.process_id)

    async with serve(receiver) as client:
        for n in range(25):
            answer = await client.post(HOOK, data=encode(payload(f"kept-{n}")), headers=JSON)
            assert answer.status == 200
        await wait_until(lambda: len(handled) == 25, "the first deliveries handled")
        (aof,) = own_redis.aof_files()
        survived = aof.stat().st_size
        for n in range(15):
            answer = await client.post(HOOK, data=encode(payload(f"lost-{n}")), headers=JSON)
            assert (await answer.json())["status"] == "accepted"
        own_redis.kill()
        own_redis.cut_aof(survived)  # what a host crash leaves of the last second's writes
        own_redis.start()

        def loss_lines() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]

        # The receiver finds it at its next claim, with no delivery arriving.
        await wait_until(lambda: any("lost" in m for m in loss_lines()), "a loss line")
        (line,) = [m for m in loss_lines() if "acknowledged" in m]
        assert (
            f"Redis at 127.0.0.1:{own_redis.port}/0 lost 15 acknowledged deliveries of the inbox"
            f" under {PREFIX!r} (its sequence of accepted entries went from 40 back to 25)"
        ) in line
        # Found once: more deliveries and claims do not count the same loss again.
        for n in range(5):
            assert await sent(client, f"after-{n}") == "accepted"
        await wait_until(lambda: len(handled) == 45, "the later deliveries handled")

    shown, _ = await inbox_stats("--redis", own_redis.url, "--prefix", PREFIX)
    assert shown["durability"] == (
        "appendonly yes, appendfsync everysec: a host crash can lose up to about 1 s of"
        " acknowledged deliveries"
    )
    assert shown["lost"].startswith("15 acknowledged (last found 20")
    assert shown["lost"].endswith("the sequence of accepted entries went from 40 back to 25)")
    assert len([m for m in loss_lines() if "acknowledged" in m]) == 1


async def test_with_two_receivers_each_lost_delivery_is_counted_once(
    own_redis: OwnRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """Two nodes answered different parts of the lost writes: their error lines together name
    each lost delivery once, and ``stats()`` gives the same total on either node."""
    nodes = [RedisInbox(own_redis.url, prefix=PREFIX) for _ in range(2)]
    try:
        for n in range(10):
            assert await nodes[0].put(event(f"kept-{n}"), b"{}") is True
        (aof,) = own_redis.aof_files()
        await asyncio.sleep(1.5)  # appendfsync everysec: the kept writes reach the disk
        survived = aof.stat().st_size
        for n in range(6):  # node 0's mark: 16
            assert await nodes[0].put(event(f"lost-a-{n}"), b"{}") is True
        for n in range(9):  # node 1's mark: 25
            assert await nodes[1].put(event(f"lost-b-{n}"), b"{}") is True
        own_redis.kill()
        own_redis.cut_aof(survived)
        own_redis.start()
        # Each node finds its part at its next claim (as within poll_interval, before any new
        # delivery is accepted; one accepted in between would take a number of the lost range).
        for node in nodes:
            await eventually(functools.partial(_claimed, node), "a claim after the restart")
        await asyncio.sleep(1.1)  # a claim sends the mark at most once a second, on its own
        for node in nodes:  # connections again, should the first one have failed
            await node.claim_batch(f"c-{id(node)}", 100)
        for round_ in range(3):
            for index, node in enumerate(nodes):
                pid = f"after-{round_}-{index}"
                await eventually(functools.partial(_put_and_claim, node, pid), "a put and claim")
        totals = {(await node.stats()).lost for node in nodes}
    finally:
        for node in nodes:
            await node.close()
    lines = [r.getMessage() for r in caplog.records if "acknowledged deliver" in r.getMessage()]
    counted = [int(n) for line in lines for n in re.findall(r" lost (\d+) acknowledged", line)]
    assert sum(counted) == 15, lines
    assert totals == {15}
    assert all("counted once, by the first receiver whose mark finds it" in m for m in lines)


async def test_a_fresh_inbox_on_a_server_with_a_loss_reports_it_in_stats(
    own_redis: OwnRedis,
) -> None:
    """``stats()`` reads the count from Redis: any process sees it, not only the one that found
    it (this one finds it at its claim, with a mark it remembers from its own puts)."""
    inbox = RedisInbox(own_redis.url, prefix=PREFIX)
    try:
        for n in range(3):
            assert await inbox.put(event(f"p-{n}"), b"{}")
        admin = redis.asyncio.Redis.from_url(own_redis.url)
        await admin.set(f"{PREFIX}inbox:seq", 1)  # as a restart from an older file leaves it
        await admin.aclose()
        await inbox.claim_batch("c", 10)
    finally:
        await inbox.close()
    fresh = RedisInbox(own_redis.url, prefix=PREFIX)
    try:
        stats = await fresh.stats()
    finally:
        await fresh.close()
    assert stats.lost == 2
    assert stats.last_loss is not None
    assert stats.last_loss.endswith("went from 3 back to 1")


# -- the choice of the strict step by version ----------------------------------------------------
# The server here is Redis 7.0, which has no WAITAOF: the choice on 7.2+ is checked on the
# private planner (webhooks._redis._durability) with the persistence such a server reports.


def test_on_redis_7_2_strict_mode_waits_for_the_fsync_with_waitaof() -> None:
    from webhooks._redis._durability import Persistence, strict_step

    everysec = Persistence(
        version="7.2.4", appendonly="yes", appendfsync="everysec", save="", replicas=0
    )
    step = strict_step(everysec, replicas=0, timeout=1.0, where="h:1/0")
    assert step.command == ("WAITAOF", 1, 0, 1000)  # on 7.0, the same settings are refused
    assert step.failure([1, 0]) is None
    assert step.failure([0, 0]) == "the write was not fsynced within 1 s (WAITAOF answered [0, 0])"
    on_70 = attrs.evolve(everysec, version="7.0.15")
    upgrade = "or upgrade to Redis 7.2+, where WAITAOF waits for the fsync"
    with pytest.raises(ConfigurationError, match=re.escape(upgrade)):
        strict_step(on_70, replicas=0, timeout=1.0, where="h:1/0")
    no_aof = attrs.evolve(everysec, appendonly="no")
    with pytest.raises(ConfigurationError, match="run `CONFIG SET appendonly yes` on it"):
        strict_step(no_aof, replicas=0, timeout=1.0, where="h:1/0")
    assert strict_step(no_aof, replicas=2, timeout=0.5, where="h:1/0").command == ("WAIT", 2, 500)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"durability": "strong"}, "durability must be 'relaxed' (the default"),
        ({"durability": "strict", "replicas": -1}, "replicas must be an int of 0 or more"),
        ({"durability": "strict", "replica_timeout": 30}, "replica_timeout must be at most 5 s"),
    ],
)
def test_a_wrong_durability_option_is_refused_naming_the_choices(
    options: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(named)):
        RedisInbox("redis://127.0.0.1:1/0", **options)  # type: ignore[arg-type]
