"""docs/getting-started.md as a newcomer follows it: the first program stages a photo and saves the
result, and the page's commands, typed in order in one shell, work as shown."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest
from codeblocks import ROOT, code_block, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

PAGE = ROOT / "docs" / "getting-started.md"


async def test_the_first_photo_is_staged_and_saved(
    sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = run_block(PAGE, "first-photo")
    monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    monkeypatch.chdir(tmp_path)  # where the program saves the result
    await program["main"](str(samples.path("bedroom-empty.jpg")))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("process ")
    assert lines[0].endswith(": done")
    assert lines[1:] == ["saved staged-1.jpg"]
    assert (tmp_path / "staged-1.jpg").read_bytes().startswith(b"\xff\xd8\xff")  # a JPEG
    assert sandbox.stats.processes_created == 1


#: The page's commands this test does not type, and why; every other command runs, in order.
NOT_RUN = {
    "python3 -m venv .venv": "the test runs in the suite's own virtualenv",
    ". .venv/bin/activate": "the test runs in the suite's own virtualenv",
    "pip install 'asyncsdk[all]'": "installed already",
    "export ASYNCSDK_API_KEY=... ASYNCSDK_BASE_URL=https://...": "for an account, not the sandbox",
    "asyncsdk sandbox --port 8080": "the test serves a sandbox of its own, on a free port",
    "export ASYNCSDK_BASE_URL=http://127.0.0.1:8080 ASYNCSDK_API_KEY=sk_sandbox_enterprise": (
        "pointed at the test's sandbox instead"
    ),
}


def console_steps(page: Path) -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of the page's console blocks, in order, with the lines shown after it
    (a comment after the command is left off)."""
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(
        r"^```console\n(.*?)^```$", page.read_text(encoding="utf-8"), re.M | re.S
    ):
        for line in block.splitlines():
            if line.startswith("$ "):
                command = re.sub(r"\s+# .*$", "", line.removeprefix("$ "))
                steps.append((command, []))
            else:
                steps[-1][1].append(line)
    return steps


def shown(lines: list[str]) -> re.Pattern[str]:
    """The output a page shows, a word ending in ``...`` (``5f1c...``) standing for any word."""
    return re.compile(
        "\n".join(r"\S+".join(map(re.escape, re.split(r"\S*\.\.\.", line))) for line in lines)
    )


@pytest.mark.slow
async def test_the_pages_commands_typed_in_order_work(tmp_path: Path) -> None:
    steps = console_steps(PAGE)
    assert {command for command, _ in steps} >= set(NOT_RUN)
    typed = [(command, output) for command, output in steps if command not in NOT_RUN]
    assert [command.split()[0] for command, _ in typed] == [
        "PHOTO=$(python",
        "python",
        "mkdir",
        "cp",
        "asyncsdk",
        "ls",
    ]
    (tmp_path / "first_photo.py").write_text(code_block(PAGE, "first-photo"), encoding="utf-8")
    # One shell, as a reader's terminal: a variable set by one command is there for the next.
    script = "set -e\n" + "".join(f"echo '@@ {n}'\n{c}\n" for n, (c, _) in enumerate(typed))
    async with Sandbox(SandboxConfig(pending_delay=0.0, processing_delay=0.0)) as sandbox:
        environment = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "ASYNCSDK_API_KEY": sandbox.api_key,
            "ASYNCSDK_BASE_URL": sandbox.base_url,
        }
        shell = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            script,
            cwd=tmp_path,
            env=environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(120):
            out, err = await shell.communicate()
        assert shell.returncode == 0, (out + err).decode()
        assert sandbox.stats.processes_created == 1 + len(samples.NAMES)
    outputs = re.split(r"^@@ \d+\n", out.decode(), flags=re.M)[1:]
    assert len(outputs) == len(typed)
    for (command, expected), output in zip(typed, outputs, strict=True):
        if expected:
            assert shown(expected).fullmatch(output.rstrip("\n")), (command, output)
    staged = sorted(path.name for path in (tmp_path / "staged").glob("*.jpg"))
    assert len(staged) == len(samples.NAMES), staged
    assert all("--virtual-staging-" in name for name in staged)
    assert (tmp_path / "staged-1.jpg").is_file()
