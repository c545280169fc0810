"""Errors: one line on stderr, exit codes scripts can rely on, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsdk.cli import main

from .conftest import run_module


def test_missing_key_exits_2_without_traceback(photos: Path, tmp_path: Path) -> None:
    done = run_module(["process", "tool-virtual-staging", photos], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: no API key: set ASYNCSDK_API_KEY")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_unreachable_service_exits_3(photos: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = run_module(
        ["tools"], cwd=tmp_path, ASYNCSDK_BASE_URL=f"http://127.0.0.1:{port}", timeout=60
    )
    assert done.returncode == 3
    assert done.stderr.startswith("error: ")
    assert "could not connect" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["process", "tool-virtual-staging", "no-such-folder", "--sandbox"], "does not exist"),
        (["process", "tool-virtual-staging", "{notes}", "--sandbox"], "is not a photo"),
        (["process", "tool-virtual-staging", "{photos}", "-w", "space", "--sandbox"], "NAME=VALUE"),
        (["process", "tool-virtual-staging", "{photos}", "-j", "0", "--sandbox"], "--concurrency"),
        (["process", "tool-item-removal-mask", "{photos}", "--sandbox"], "needs a mask"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled = [a.format(photos=photos, notes=photos / "notes.txt") for a in argv]
    assert main(filled) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert message in err
    assert err.count("\n") == 1


def test_bad_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["process"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes:" in out
    for line in ("0    everything", "1    some processes failed", "2    usage", "3    API"):
        assert line in out
    assert main(["process", "--help"]) == 0
    assert "exit codes:" in capsys.readouterr().out


def test_token_value_may_begin_with_a_dash(capsys: pytest.CaptureFixture[str]) -> None:
    # The joined "--token=-..." reaches argparse as the token; --no-verify then conflicts with it.
    assert main(["receiver", "--token", "-abc", "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert "not allowed with argument --token" in err
    assert "expected one argument" not in err


def test_token_followed_by_an_option_still_asks_for_a_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["receiver", "--token", "--port", "0"]) == 2
    assert "argument --token: expected one argument" in capsys.readouterr().err
