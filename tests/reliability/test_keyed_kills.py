"""Keyed runs survive SIGKILL at every step: N keys create exactly N processes, all finish.

A child process (``keyed_child.py``) runs N keyed runs against the sandbox of this test.  A
sandbox chaos rule holds it at a step (a request held before it is carried out, or carried out
and its answer trickled), the test waits until the journal or the sandbox shows the step, and
kills the child with SIGKILL.  A new child on the same journal then finishes every run; a third
replays every key and creates nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from asyncsdk import (
    Journal,
    KeyReusedError,
    PostgresJournal,
    ProcessStatus,
    RedisJournal,
    RunStage,
    SQLiteJournal,
)
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import ChaosKind, Sandbox, SandboxConfig

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["listing-1/bedroom", "listing-2/bedroom", "listing-3/bedroom"]
HELD = 30.0  # seconds a chaos rule holds a request: far longer than any test waits
FINISHED_WITHIN = 120.0  # seconds a child may take to finish its runs


async def start_child(
    sb: Sandbox, journal: str, keys: list[str], *, lease: float = 60.0
) -> asyncio.subprocess.Process:
    env = {**os.environ, "ASYNCSDK_API_KEY": sb.api_key, "KEYED_CHILD_LEASE": str(lease)}
    env.pop("ASYNCSDK_BASE_URL", None)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.reliability.keyed_child",
        sb.base_url,
        journal,
        *keys,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(child: asyncio.subprocess.Process) -> dict[str, list[str]]:
    """The child's answer: each key's process id and status.  A child that has not answered in
    120 s is asked where its tasks wait, then killed (never left running after its test), and
    the test fails with what it printed."""
    talk = asyncio.ensure_future(child.communicate())
    if not (await asyncio.wait({talk}, timeout=FINISHED_WITHIN))[0]:
        child.send_signal(signal.SIGUSR1)
        await asyncio.sleep(1)
        child.kill()
        _, err = await talk
        raise AssertionError(
            f"the child did not finish in {FINISHED_WITHIN:g} s; where its tasks waited:\n"
            + err.decode(errors="replace")[-20_000:]
        )
    out, err = talk.result()
    assert child.returncode == 0, err.decode()
    answer: dict[str, list[str]] = json.loads(out)
    return answer


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(600):  # 60 s at most
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the child never reached: {what}")


async def killed(child: asyncio.subprocess.Process) -> None:
    child.send_signal(signal.SIGKILL)
    await child.communicate()
    assert child.returncode == -signal.SIGKILL


def stages_are(journal: Journal, stage: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        entries = [await journal.get(key) for key in KEYS]
        return all(entry is not None and entry.stage == stage for entry in entries)

    return check


def sandbox_shows(sb: Sandbox, counter: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return bool(getattr(sb.stats, counter) == len(KEYS))

    return check


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def journal_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The journal the children share: ``sqlite:PATH``, ``postgres:SCHEMA`` or
    ``redis:PREFIX``."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'runs.sqlite3'}"
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    if request.param == "redis":
        monkeypatch.setenv("ASYNCSDK_TEST_REDIS_URL", request.getfixturevalue("redis_url"))
        return f"redis:{request.getfixturevalue('redis_prefix')}"
    monkeypatch.setenv("ASYNCSDK_TEST_POSTGRES_DSN", request.getfixturevalue("postgres_dsn"))
    return f"postgres:{request.getfixturevalue('postgres_schema')}"


@pytest.fixture
async def journal(journal_spec: str) -> AsyncIterator[tuple[str, Journal]]:
    """The children's journal spec, and the same journal opened by the test to watch them."""
    kind, _, where = journal_spec.partition(":")
    watcher: Journal
    if kind == "sqlite":
        watcher = SQLiteJournal(where)
    elif kind == "redis":
        watcher = RedisJournal.connect(os.environ["ASYNCSDK_TEST_REDIS_URL"], prefix=where)
    else:
        dsn = os.environ["ASYNCSDK_TEST_POSTGRES_DSN"]
        watcher = await PostgresJournal.connect(dsn, schema=where)
    yield journal_spec, watcher
    await watcher.close()


# (a chaos rule on a route, or None; what shows the child reached the step)
STEPS = {
    # Held before the upload is carried out: only the intent is recorded.
    "before the upload": ("POST", "/v3/order", ChaosKind.SLOW, "stage", RunStage.INTENT),
    # The orders exist, their answers never arrive: the next run uploads again, pays nothing.
    "after the upload": ("POST", "/v3/order", ChaosKind.SLOW_BODY, "count", "orders_created"),
    # "creating" recorded, the request held before the service carries it out.
    "creating, not received": ("POST", "/v3/process", ChaosKind.SLOW, "stage", RunStage.CREATING),
    # The service created (and billed) the processes, their answers never arrive.
    "creating, answer lost": (
        "POST",
        "/v3/process",
        ChaosKind.SLOW_BODY,
        "count",
        "processes_created",
    ),
}


@pytest.mark.parametrize("step", list(STEPS))
async def test_killed_at_a_step_and_restarted_creates_each_key_once(
    journal: tuple[str, Journal], step: str
) -> None:
    spec, watcher = journal
    method, path, kind, shown_by, value = STEPS[step]
    async with Sandbox(SandboxConfig()) as sb:
        sb.chaos.add(method=method, path=path, kind=kind, delay=HELD, times=None)
        child = await start_child(sb, spec, KEYS)
        if shown_by == "stage":
            await until(stages_are(watcher, value), f"{step}: {value}")
        else:
            await until(sandbox_shows(sb, value), f"{step}: {value}")
        await killed(child)
        sb.chaos.clear()
        created_before = sb.stats.processes_created
        answer = await finished(await start_child(sb, spec, KEYS))
        replayed = await finished(await start_child(sb, spec, KEYS))
        assert sb.stats.processes_created == len(KEYS)
        assert created_before in (0, len(KEYS))
    assert all(status == ProcessStatus.DONE for _, status in answer.values())
    assert len({pid for pid, _ in answer.values()}) == len(KEYS)
    assert replayed == answer
    assert await watcher.unfinished() == []


async def test_killed_while_waiting_and_restarted_waits_for_the_same_processes(
    journal: tuple[str, Journal],
) -> None:
    spec, watcher = journal
    async with Sandbox(SandboxConfig(processing_delay=3.0)) as sb:
        child = await start_child(sb, spec, KEYS)
        await until(stages_are(watcher, RunStage.CREATED), "created, waiting")
        recorded = {key: (await watcher.get(key)).process_ids for key in KEYS}  # type: ignore[union-attr]
        await killed(child)
        answer = await finished(await start_child(sb, spec, KEYS))
        replayed = await finished(await start_child(sb, spec, KEYS))
        assert sb.stats.processes_created == len(KEYS)
    assert {key: (pid,) for key, (pid, _) in answer.items()} == recorded
    assert all(status == ProcessStatus.DONE for _, status in answer.values())
    assert replayed == answer


async def test_killed_at_random_moments_n_keys_still_create_n_processes(
    journal: tuple[str, Journal],
) -> None:
    spec, watcher = journal
    moments = random.Random(35)
    async with Sandbox(SandboxConfig(processing_delay=0.5)) as sb:
        for _ in range(4):
            child = await start_child(sb, spec, KEYS)
            await asyncio.sleep(moments.uniform(0.05, 1.5))
            with contextlib.suppress(ProcessLookupError):  # it may have finished: that is fine
                child.send_signal(signal.SIGKILL)
            await child.communicate()
        answer = await finished(await start_child(sb, spec, KEYS))
        replayed = await finished(await start_child(sb, spec, KEYS))
        assert sb.stats.processes_created == len(KEYS)
    assert all(status == ProcessStatus.DONE for _, status in answer.values())
    assert replayed == answer
    assert await watcher.unfinished() == []


async def test_two_processes_on_one_journal_create_each_key_once_when_one_is_killed(
    journal: tuple[str, Journal],
) -> None:
    spec, watcher = journal
    async with Sandbox(SandboxConfig(processing_delay=2.0)) as sb:
        first = await start_child(sb, spec, KEYS)
        second = await start_child(sb, spec, list(reversed(KEYS)))
        await until(stages_are(watcher, RunStage.CREATED), "created, waiting")
        await killed(first)  # the second takes its runs over
        answer = await finished(second)
        assert sb.stats.processes_created == len(KEYS)
    assert set(answer) == set(KEYS)
    assert all(status == ProcessStatus.DONE for _, status in answer.values())
    assert len({pid for pid, _ in answer.values()}) == len(KEYS)


async def test_a_frozen_process_loses_its_runs_when_its_lease_passes_and_never_finishes_them(
    journal: tuple[str, Journal],
) -> None:
    # Frozen, not killed: its process is still there, so only the lease tells it stopped.
    spec, watcher = journal
    async with Sandbox(SandboxConfig(processing_delay=3.0)) as sb:
        frozen = await start_child(sb, spec, KEYS, lease=1.0)
        await until(stages_are(watcher, RunStage.CREATED), "created, waiting")
        frozen.send_signal(signal.SIGSTOP)
        try:
            answer = await finished(await start_child(sb, spec, KEYS, lease=1.0))
        finally:
            frozen.send_signal(signal.SIGCONT)
        _, err = await asyncio.wait_for(frozen.communicate(), 60)
        assert sb.stats.processes_created == len(KEYS)
    assert all(status == ProcessStatus.DONE for _, status in answer.values())
    assert frozen.returncode == 1
    assert "JournalError" in err.decode()
    assert "was taken over by another caller" in err.decode()


async def test_a_key_reused_with_another_photo_in_a_new_process_raises_and_creates_nothing(
    tmp_path: Path,
) -> None:
    spec = f"sqlite:{tmp_path / 'runs.sqlite3'}"
    async with Sandbox(SandboxConfig()) as sb:
        await finished(await start_child(sb, spec, KEYS[:1]))
        # The same key, asked for by a client in this process with the kitchen photo.
        async with sb.client(journal=tmp_path / "runs.sqlite3") as client:
            with pytest.raises(KeyReusedError, match="listing-1/bedroom"):
                await client.run(
                    "tool-virtual-staging",
                    sample("kitchen.jpg"),
                    widgets={"space": "bedroom", "style": "modern"},
                    key=KEYS[0],
                )
        assert sb.stats.processes_created == 1
        assert sb.stats.orders_created == 1
