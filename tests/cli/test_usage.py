"""A mistyped command line answers with its own subcommand's usage; every ``--help`` shows the
defaults; a refused key or an address nothing listens on says what to change."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsdk.cli import build_parser, main
from asyncsdk.sandbox import Sandbox

from .conftest import run_cli, run_module


def test_a_stray_argument_prints_the_subcommands_usage(photos: Path, tmp_path: Path) -> None:
    # "-w space bedroom" for "-w space=bedroom": a typo a user makes.
    done = run_module(
        ["process", "tool-virtual-staging", photos, "-w", "space", "bedroom", "--sandbox"],
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("usage: asyncsdk process [-h] [--widget NAME=VALUE]")
    assert done.stderr.endswith("asyncsdk process: error: unrecognized arguments: bedroom\n")
    assert not (tmp_path / "results").exists()  # nothing was started


def test_a_nested_subcommand_answers_with_its_own_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["inbox", "stats", "--sqlite", str(tmp_path / "inbox.db"), "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: asyncsdk inbox stats")
    assert "asyncsdk inbox stats: error: unrecognized arguments: --bogus" in err


def test_an_unknown_command_still_gets_the_top_level_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["procss"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: asyncsdk [-h]")
    assert "invalid choice: 'procss'" in err


def test_sandbox_help_shows_its_delay_defaults(tmp_path: Path) -> None:
    done = run_module(["sandbox", "--help"], cwd=tmp_path)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse wraps lines
    assert "seconds a process is pending (default: 1.0)" in text
    assert "seconds it is processing (default: 3.0)" in text
    assert "share of processes that fail (default: 0.0)" in text


def test_the_sandbox_module_help_shows_the_same_defaults(tmp_path: Path) -> None:
    # python -m asyncsdk.sandbox: the sandbox alone, as docs/sandbox.md starts it.
    done = subprocess.run(
        [sys.executable, "-m", "asyncsdk.sandbox", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "seconds a process is pending (default: 1.0)" in text
    assert "seconds it is processing (default: 3.0)" in text
    assert "with it ids repeat run after run" in text


def _parsers(
    parser: argparse.ArgumentParser, name: str
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:  # argparse has no public list of a parser's subcommands
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found += _parsers(sub, f"{name} {sub_name}")
    return found


@pytest.mark.parametrize(
    ("command", "parser"), _parsers(build_parser(), "asyncsdk"), ids=lambda value: str(value)
)
def test_every_help_shows_every_default(command: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert "%(" not in text
    for action in parser._actions:
        default = action.default
        if (
            not action.option_strings
            or default is False
            or default in (None, [], argparse.SUPPRESS)
        ):
            continue  # a flag, off unless given, or an option without a default
        # Each option's help says its default, in its own words or argparse's.
        assert "default" in (action.help or ""), (command, action.option_strings)
        if "%(default)s" in (action.help or ""):
            assert f"(default: {default})" in " ".join(text.split()), (command, action.dest)


async def test_the_cli_names_the_variable_of_a_refused_key(
    sandbox: Sandbox,
    photos: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASYNCSDK_API_KEY", "sk_from_env_but_wrong")
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    code = await run_cli(
        "process",
        "tool-virtual-staging",
        photos,
        "-w",
        "space=bedroom",
        "-w",
        "style=modern",
        "--out",
        tmp_path / "out",
    )
    err = capsys.readouterr().err
    assert code == 3
    assert "the API key 'sk_fro...' (from ASYNCSDK_API_KEY) was refused" in err
    assert "sk_from_env_but_wrong" not in err


def test_the_cli_says_nothing_listens_on_a_closed_local_port(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = run_module(
        ["tools"],
        cwd=tmp_path,
        ASYNCSDK_API_KEY="sk_x",
        ASYNCSDK_BASE_URL=f"http://127.0.0.1:{port}",
        timeout=60,
    )
    assert done.returncode == 3
    assert f"could not connect to 127.0.0.1:{port}: connection refused, nothing listens there" in (
        done.stderr
    )
    assert f"asyncsdk sandbox --port {port}" in done.stderr
    assert "ssl:default" not in done.stderr
