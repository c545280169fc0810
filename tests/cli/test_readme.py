"""The README's first programs run as written against the sandbox: a photo staged and its result
saved, then the receiver mounted in an app, which the sandbox's webhook reaches."""

from __future__ import annotations

import asyncio
import re
import secrets
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from codeblocks import ROOT, code_blocks, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig
from webhooks import RedactingAccessLogger

README = ROOT / "README.md"
FAST = SandboxConfig(pending_delay=0.0, processing_delay=0.0)


def test_the_first_python_a_reader_meets_is_the_shortest_program() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = code_blocks(README)
    assert list(blocks) == ["first-photo", "receiver"]
    assert text.count("```python") == len(blocks)  # every program of the README is run here
    assert len(blocks["first-photo"].splitlines()) <= 20
    assert len(blocks["receiver"].splitlines()) <= 25
    # In the order a reader types: a virtualenv, activated, the install (from the index, else a
    # checkout or a git address), the sandbox, the first program, the receiver, the demo, tests.
    steps = [
        "## Install",
        "$ python3 -m venv .venv",
        "$ . .venv/bin/activate",
        "$ pip install 'asyncsdk[sandbox]'",
        "$ pip install '.[sandbox]'",
        "git+https://",
        "$ asyncsdk sandbox --port 8080",
        "<!-- test: first-photo -->",
        "$ python first_photo.py",
        "<!-- test: receiver -->",
        "$ python receiver.py &",
        "## Run the demo",
        "$ make demo",
        "## Run the tests",
        "$ make test",
    ]
    places = [text.index(step) for step in steps]
    assert places == sorted(places), [s for s, p in zip(steps, places, strict=True)]
    # No command of the package comes before the virtualenv it is installed into is activated.
    assert text.index("$ asyncsdk") > text.index("$ . .venv/bin/activate")
    assert "saved as `first_photo.py`" in text
    assert "saved as `receiver.py`" in text


def test_the_readme_says_what_make_test_needs_and_how_ci_provides_it() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Run the tests") : text.index("## The command line")]
    for needed in ("Redis server at 127.0.0.1:6379", "PostgreSQL server at 127.0.0.1:5432"):
        assert needed in section
    assert "database `test`" in section
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # What the section says .ci/run installs is what it installs, and it ends in `make test`.
    for package in ("redis-server", "postgresql", "pgbouncer", "valgrind", "chromium", "openssl"):
        assert f"apt-get install -y -qq {package}" in ci
        assert f"`{package}`" in section
    assert ci.rstrip().endswith("make test")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert (
        "\ntest: lint typecheck\n"
        '\t$(BIN)/python -m pytest -n 6 --dist loadgroup -m "not quiet and not alone"\n'
        "\t$(BIN)/python -m pytest -n 2 -m quiet\n"
        "\t$(BIN)/python -m pytest -m alone\n"
    ) in makefile
    assert "six test processes" in section
    assert "\ndemo: $(STAMP)\n\t$(BIN)/python -m asyncsdk demo\n" in makefile


async def test_the_first_photo_is_staged_and_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = run_block(README, "first-photo")
    monkeypatch.chdir(tmp_path)
    async with Sandbox(FAST) as sandbox:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
        await program["main"]()
        assert sandbox.stats.processes_created == 1
    assert re.fullmatch(r"process \S+: done\n", capsys.readouterr().out)
    staged = (tmp_path / "staged-1.jpg").read_bytes()
    assert staged.startswith(b"\xff\xd8\xff")  # a JPEG, and not the photo sent
    assert staged != samples.path("bedroom-empty.jpg").read_bytes()


async def test_the_mounted_receiver_gets_the_first_photos_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the README's "try both together": the receiver serves, the sandbox delivers to it, and
    the first program runs."""
    receiver = run_block(README, "receiver")
    first_photo = run_block(README, "first-photo")
    monkeypatch.chdir(tmp_path)  # the receiver's SQLite inbox lands here
    token = secrets.token_urlsafe(32)
    server = TestServer(receiver["make_app"](token), host="127.0.0.1", port=0)
    await server.start_server(access_log_class=RedactingAccessLogger)
    async with server, Sandbox(FAST) as sandbox:
        sandbox.register_webhook(str(server.make_url(f"/hooks/{token}")))
        monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
        await first_photo["main"]()
        await sandbox.wait_idle()
        printed = ""
        async with asyncio.timeout(10):
            while " done: " not in printed:  # the receiver's handler prints once it has run
                printed += capsys.readouterr().out
                await asyncio.sleep(0.02)
        assert [d.delivered for d in sandbox.stats.deliveries] == [True]
    process_id = re.findall(r"^process (\S+): done$", printed, re.M)
    assert process_id, printed
    # the handler's line: the process and its result's URL
    assert re.search(rf"^{process_id[0]} done: http://127\.0\.0\.1:\d+/\S+$", printed, re.M)
    assert (tmp_path / "inbox.db").exists()
