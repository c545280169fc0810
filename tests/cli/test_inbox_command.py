"""``asyncsdk inbox``: depth and dead letters of a receiver's inbox, replayed once or purged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from store_places import Place

from asyncsdk import ProcessCompleted
from webhooks import (
    DeliveryInfo,
    EventReceiver,
    Inbox,
    PostgresInbox,
    RedisInbox,
    SQLiteInbox,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookEvent,
    WebhookReceiver,
)

from .conftest import run_cli

TOKEN = "cli-" + "t0k3n" * 6
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HOOK = f"/hooks/{TOKEN}"
JSON = {"Content-Type": "application/json"}


def body(process_id: str) -> bytes:
    return json.dumps(
        {
            "event": "process.completed",
            "process_id": process_id,
            "order_id": "o-1",
            "tool": "tool-virtual-staging",
            "status": "failed",
        }
    ).encode()


async def served(
    receiver: WebhookReceiver | EventReceiver,
) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application()
    receiver.setup(app)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def settle(
    receiver: WebhookReceiver | EventReceiver, dead: int = 0, processed: int = 0
) -> None:
    """Poll the receiver's counters (plain numbers: nothing to await) until they read so."""

    def reached() -> bool:
        return (receiver.metrics.dead_lettered, receiver.metrics.processed) == (dead, processed)

    async with asyncio.timeout(10):  # a guard against a hang, not a speed requirement
        while not reached():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


async def test_the_dead_letter_table_shows_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The receiver refuses such ids; an entry written by another program or an earlier version
    # may hold them all the same, and the table must not let them drive the terminal.
    path = tmp_path / "hooks.sqlite3"
    inbox = SQLiteInbox(path)
    hostile = "p-1\x1b]0;title\x07\x1b[2J"
    event = ProcessCompleted(
        event="process.completed",
        process_id=hostile,
        order_id="o-1",
        tool="tool-virtual-staging",
        status="failed",
    )
    assert await inbox.put(event, b"{}")
    (entry,) = await inbox.claim_batch("c1", 1)
    await inbox.dead_letter(entry.id, "gave up")
    await inbox.close()
    assert await run_cli("inbox", "dead", "--sqlite", str(path)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "p-1\\x1b]0;title\\x07\\x1b[2J" in out


async def test_dead_letters_are_listed_replayed_once_and_purged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hooks.sqlite3"
    failing = WebhookReceiver(
        inbox=SQLiteInbox(path), verifier=TokenVerifier(TOKEN), max_attempts=1, poll_interval=0.05
    )

    @failing.on_completed()
    async def broken(event: ProcessCompleted) -> None:
        raise RuntimeError("the photo store is down")

    async for client in served(failing):
        for pid in ("p-1", "p-2"):
            assert (await client.post(HOOK, data=body(pid), headers=JSON)).status == 200
        await settle(failing, dead=2)

    assert await run_cli("inbox", "stats", "--sqlite", path, "--json") == 0
    assert json.loads(lines(capsys)[0]) == {
        "depth": 0,
        "oldest_age": None,
        "dead": 2,
        "durability": None,  # SQLite's promise does not depend on a setting: fsync at commit
        "lost": 0,
        "last_loss": None,
        "replayed": 0,
    }
    assert await run_cli("inbox", "dead", "--sqlite", path, "--json") == 0
    dead = {row["process_id"]: row for row in map(json.loads, lines(capsys))}
    assert set(dead) == {"p-1", "p-2"}
    assert "the photo store is down" in dead["p-1"]["last_error"]

    assert await run_cli("inbox", "replay", "--sqlite", path, dead["p-1"]["id"]) == 0
    assert lines(capsys) == [f"replayed {dead['p-1']['id']}"]
    assert await run_cli("inbox", "purge", "--sqlite", path, dead["p-2"]["id"]) == 0
    assert lines(capsys) == [f"purged {dead['p-2']['id']}"]
    # Neither is a dead letter any more.
    assert await run_cli("inbox", "replay", "--sqlite", path, dead["p-1"]["id"]) == 1
    assert capsys.readouterr().err == (
        f"error: no dead letter with id {dead['p-1']['id']!r}; 'asyncsdk inbox dead' lists them, "
        "with the same store options\n"
    )
    assert await run_cli("inbox", "stats", "--sqlite", path, "--json") == 0
    after = json.loads(lines(capsys)[0])
    assert (after["dead"], after["replayed"]) == (0, 1)  # the store counted the replay

    fixed = WebhookReceiver(
        inbox=SQLiteInbox(path), verifier=TokenVerifier(TOKEN), poll_interval=0.05
    )
    runs: list[tuple[str, int]] = []

    @fixed.on_completed()
    async def record(event: ProcessCompleted, info: DeliveryInfo) -> None:
        runs.append((event.process_id, info.attempt))

    async for client in served(fixed):
        await settle(fixed, processed=1)
        # The sender's retries: the replayed event kept its one dedup claim, the purged one too.
        for pid in ("p-1", "p-2"):
            answer = await client.post(HOOK, data=body(pid), headers=JSON)
            assert await answer.json() == {"status": "duplicate"}
        await asyncio.sleep(0.2)  # time for a wrongly stored copy to be handled
    assert runs == [("p-1", 1)]  # the replayed event, handled exactly once


async def test_another_sender_s_dead_letters_are_listed_by_message_id_and_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "billing.sqlite3"
    signer = StandardWebhooksVerifier(SECRET)
    failing = EventReceiver(
        inbox=SQLiteInbox(path), verifier=signer, max_attempts=1, poll_interval=0.05
    )

    @failing.on("invoice.paid")
    async def broken(event: WebhookEvent) -> None:
        raise RuntimeError("the ledger is down")

    paid = json.dumps({"type": "invoice.paid", "data": {"invoice": "in_1"}}).encode()
    async for client in served(failing):
        headers = {**JSON, **signer.headers("msg_1", paid)}
        assert (await client.post("/hooks/", data=paid, headers=headers)).status == 200
        await settle(failing, dead=1)

    assert await run_cli("inbox", "dead", "--sqlite", path) == 0
    table = lines(capsys)
    header, row = table[0], table[-1]
    assert len(table) == 3  # the header, its rule, one row
    assert header.split() == ["id", "message_id", "type", "attempts", "received_at", "last_error"]
    assert row.split()[1:4] == ["msg_1", "invoice.paid", "1"]
    assert await run_cli("inbox", "dead", "--sqlite", path, "--json") == 0
    [dead] = map(json.loads, lines(capsys))
    assert (dead["message_id"], dead["type"]) == ("msg_1", "invoice.paid")
    assert await run_cli("inbox", "replay", "--sqlite", path, dead["id"]) == 0
    capsys.readouterr()

    fixed = EventReceiver(inbox=SQLiteInbox(path), verifier=signer, poll_interval=0.05)
    seen: list[tuple[str, object]] = []

    @fixed.on("invoice.paid")
    async def record(event: WebhookEvent) -> None:
        seen.append((event.id, event.data))

    async for client in served(fixed):
        await settle(fixed, processed=1)
        headers = {**JSON, **signer.headers("msg_1", paid)}
        answer = await client.post("/hooks/", data=paid, headers=headers)
        assert await answer.json() == {"status": "duplicate"}
    assert seen == [("msg_1", {"invoice": "in_1"})]


async def test_a_missing_file_or_no_ids_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("inbox", "stats", "--sqlite", tmp_path / "none.sqlite3") == 2
    assert "no SQLite inbox at" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite3").exists()
    (tmp_path / "hooks.sqlite3").touch()
    assert await run_cli("inbox", "replay", "--sqlite", tmp_path / "hooks.sqlite3") == 2
    assert "or pass --all" in capsys.readouterr().err


async def fill(inbox: Inbox) -> None:
    """Three events: one dead letter, two unfinished."""
    for pid in ("p-1", "p-2", "p-3"):
        await inbox.put(
            ProcessCompleted(
                event="process.completed",
                process_id=pid,
                order_id="o-1",
                tool="tool-virtual-staging",
                status="failed",
            ),
            body(pid),
        )
    (first,) = await inbox.claim_batch("c1", 1)
    await inbox.dead_letter(first.id, "gave up")


async def check_store(options: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert await run_cli("inbox", "stats", *options, "--json") == 0
    stats = json.loads(lines(capsys)[0])
    assert (stats["depth"], stats["dead"]) == (2, 1)
    assert stats["oldest_age"] >= 0
    assert await run_cli("inbox", "dead", *options) == 0
    table = lines(capsys)
    assert table[0].split()[:3] == ["id", "process_id", "status"]
    assert "p-1" in table[-1]
    assert await run_cli("inbox", "replay", *options, "--all") == 0
    assert lines(capsys)[0].startswith("replayed ")
    assert await run_cli("inbox", "stats", *options, "--json") == 0
    assert json.loads(lines(capsys)[0])["depth"] == 3


def options_of(place: Place) -> list[str]:
    """The command line's options naming the inbox at ``place``, as its row spells them."""
    store = place.store
    namespace = [f"--{store.namespace}", place.namespace] if store.namespace else []
    return [f"--{store.name}", place.place, *namespace]


async def test_each_durable_store_by_its_options(
    durable_place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    inbox = durable_place.inbox()
    try:
        await fill(inbox)
    finally:
        await inbox.close()
    await check_store(options_of(durable_place), capsys)


async def test_a_place_without_an_inbox_is_refused_or_warned_and_left_uncreated(
    durable_place: Place, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused where opening the inbox would create one (a SQLite file, a PostgreSQL schema);
    warned about beside the zeros where a receiver's inbox appears with its first delivery (a
    Redis prefix): most often the place is not the receivers'."""
    store = durable_place.store
    code = await run_cli("inbox", "stats", *options_of(durable_place))
    captured = capsys.readouterr()
    if store.empty_until_first_delivery:
        assert code == 0
        assert f"warning: nothing is stored under the {store.namespace} " in captured.err
        assert "0" in captured.out
    else:
        assert code == 2
        assert "the receivers use" in captured.err
    inbox = durable_place.inbox()
    try:
        assert not await store.exists(inbox)
    finally:
        await inbox.close()


@pytest.mark.redis
async def test_the_receiver_command_s_spelling_names_the_same_redis_inbox(
    redis_url: str, redis_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    try:
        await fill(inbox)
    finally:
        await inbox.close()
    assert (
        await run_cli("inbox", "stats", "--redis", redis_url, "--redis-prefix", redis_prefix) == 0
    )
    assert "warning" not in capsys.readouterr().err


@pytest.mark.postgres
async def test_the_postgres_inbox_through_a_pooler(
    store_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Directly, and through PgBouncer in each pool mode (the DSN says which)."""
    inbox = PostgresInbox(store_dsn, schema=postgres_schema)
    try:
        await fill(inbox)
    finally:
        await inbox.close()
    await check_store(["--postgres", store_dsn, "--schema", postgres_schema], capsys)


@pytest.mark.postgres
async def test_a_missing_schema_is_named_with_the_option_to_fix(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        await run_cli("inbox", "stats", "--postgres", postgres_dsn, "--schema", postgres_schema)
        == 2
    )
    err = capsys.readouterr().err
    assert f"no inbox in the schema {postgres_schema!r}" in err
    assert "--schema the receivers use" in err


@pytest.mark.parametrize(
    ("store", "code", "words"),
    [
        (["--postgres", "notadsn"], 2, "dsn must be a postgresql:// URL"),
        (["--postgres", "postgres+asyncpg://app:pw@h/db"], 2, "'postgres+asyncpg://app:***@h/db'"),
        (["--redis", "redis+sentinel://:pw@h/0"], 2, "Sentinel of 'redis+sentinel://:***@h/0'"),
        (["--redis", "rediss+sentinel://:pw@h/0"], 2, "not 'rediss+sentinel://:***@h/0'"),
        (["--postgres", "postgresql://app:pw@127.0.0.1/db?sslmode=bogus"], 2, "fix the --postgres"),
        (["--redis", "notaurl"], 2, "url must be a redis://"),
        (["--postgres", "postgresql://app:pw@127.0.0.1:1/db"], 3, "PostgresInbox('127.0.0.1:1/db'"),
        (["--redis", "redis://:pw@127.0.0.1:1/0"], 3, "RedisInbox('127.0.0.1:1/0'"),
    ],
)
async def test_a_bad_or_unreachable_store_is_one_line_without_its_password(
    store: list[str], code: int, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("inbox", "stats", *store) == code
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert words in err
    assert ":pw@" not in err
