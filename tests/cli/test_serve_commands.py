"""``asyncsdk sandbox`` and ``asyncsdk receiver`` as real processes: serve, stop on a signal."""

from __future__ import annotations

import json
import re
import secrets
import signal
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from store_places import Place

from .conftest import subprocess_env

EVENT = {
    "event": "process.completed",
    "process_id": "p-cli-1",
    "order_id": "o-cli-1",
    "tool": "tool-day-to-dusk",
    "status": "done",
    "final_assets": [
        {
            "asset_id": "a1",
            "asset_type": "image",
            "temp_src": "https://files.example.com/a1.jpg",
            "temp_thumbnail_src": "https://files.example.com/a1-thumb.jpg",
        }
    ],
}


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "asyncsdk", *args],
        cwd=cwd,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(stream: IO[str] | None, pattern: str) -> re.Match[str]:
    assert stream is not None
    seen = []
    for line in stream:
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"{pattern!r} never printed; got {''.join(seen)!r}")


def _run_once(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` to its end (a command that is to stop at once with an error)."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def stopper() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.communicate()


def _post(url: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(  # noqa: S310 - a local http URL built by the test
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_sandbox_serves_until_sigterm(tmp_path: Path, stopper: list[subprocess.Popen[str]]) -> None:
    child = _start(["sandbox", "--port", "0"], tmp_path)
    stopper.append(child)
    url = _wait_for(child.stdout, r"serving on (http://127\.0\.0\.1:\d+)").group(1)
    key = _wait_for(child.stdout, r"API key: (\S+)").group(1)
    request = urllib.request.Request(f"{url}/api/tools")  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.status == 200
        assert "tool-virtual-staging" in response.read().decode()
    assert key == "sk_sandbox_enterprise"
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0
    assert "sandbox stopped" in out
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [["asyncsdk", "sandbox"], ["asyncsdk.sandbox"]])
def test_a_port_in_use_is_one_line_that_names_the_option(
    tmp_path: Path, command: list[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run_once([*command, "--port", str(port)], tmp_path)
    assert done.returncode != 0
    assert done.stderr == (
        f"error: port {port} on 127.0.0.1 is in use (another sandbox, or the app it serves?); "
        "pass --port N for another, or --port 0 for a free one\n"
    )


@pytest.mark.parametrize("command", [["asyncsdk", "sandbox"], ["asyncsdk.sandbox"]])
@pytest.mark.parametrize("where", ["missing/port", "a-folder"])
def test_a_port_file_that_cannot_be_written_is_named_and_leaves_no_partial_file(
    tmp_path: Path, command: list[str], where: str
) -> None:
    (tmp_path / "a-folder").mkdir()
    port_file = tmp_path / where
    done = _run_once([*command, "--port", "0", "--port-file", str(port_file)], tmp_path)
    assert done.returncode != 0
    assert done.stderr == (
        f"error: cannot write the --port-file {port_file}: "
        f"{'Is a directory' if where == 'a-folder' else 'No such file or directory'}; "
        "name a file in a folder that exists\n"
    )
    assert not list(tmp_path.rglob("*.partial"))


def test_a_port_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    done = _run_once(["asyncsdk", "sandbox", "--port", "99999"], tmp_path)
    assert done.returncode == 2
    assert "a port is 0 to 65535 (0 picks a free one), not '99999'" in done.stderr
    assert "Traceback" not in done.stderr


def test_receiver_writes_events_as_json_lines(
    tmp_path: Path, stopper: list[subprocess.Popen[str]]
) -> None:
    token = "-" + secrets.token_urlsafe(24)  # a leading "-" must still be taken as the value
    events = tmp_path / "events.jsonl"
    child = _start(["receiver", "--port", "0", "--token", token, "--out", str(events)], tmp_path)
    stopper.append(child)
    base = _wait_for(child.stderr, r"listening on (http://127\.0\.0\.1:\d+/hooks/)").group(1)
    assert _post(base + "wrong-token-wrong-token", json.dumps(EVENT).encode())[0] == 401
    status, body = _post(base + token, json.dumps(EVENT).encode())
    assert (status, json.loads(body)) == (200, {"status": "accepted"})
    status, body = _post(base + token, json.dumps(EVENT).encode())
    assert json.loads(body) == {"status": "duplicate"}
    child.send_signal(signal.SIGINT)  # drains the worker, then stops
    _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert len(lines) == 1
    assert lines[0]["process_id"] == "p-cli-1"
    assert lines[0]["final_assets"][0]["src"] == "https://files.example.com/a1.jpg"
    assert token not in err  # a token given by the user is not printed
    assert stat.S_IMODE(events.stat().st_mode) == 0o600  # signed result URLs: the user's alone


async def test_receiver_on_a_shared_store_publishes_to_its_registry(
    tmp_path: Path, shared_place: Place, stopper: list[subprocess.Popen[str]]
) -> None:
    """``--redis URL --redis-prefix P``, ``--postgres DSN --postgres-schema S``: an SDK client
    elsewhere awaits the result on the same store's registry."""
    import asyncio

    store = shared_place.store
    args = ["receiver", "--port", "0", "--no-verify", f"--{store.name}", shared_place.place]
    child = _start([*args, f"--{store.name}-{store.namespace}", shared_place.namespace], tmp_path)
    stopper.append(child)
    base = await asyncio.to_thread(_wait_for, child.stderr, r"listening on (http://\S+/hooks/)")
    assert store.open_backend is not None
    backend = store.open_backend(shared_place.place, shared_place.namespace)
    try:
        registry: Any = backend.registry  # a Registry: the sink that can be waited on
        async with registry:
            waiting = asyncio.ensure_future(registry.wait("p-cli-1", timeout=20))
            status, _ = await asyncio.to_thread(_post, base.group(1), json.dumps(EVENT).encode())
            assert status == 200
            event = await waiting
    finally:
        await backend.close()
    assert event.status == "done"
    assert event.final_assets[0].src == "https://files.example.com/a1.jpg"
    child.send_signal(signal.SIGINT)
    out, _ = await asyncio.to_thread(child.communicate, timeout=30)
    assert child.returncode == 0
    assert json.loads(out.splitlines()[0])["process_id"] == "p-cli-1"
