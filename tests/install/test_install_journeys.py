"""A newcomer's first steps, from the built wheel in fresh virtualenvs: one per set of extras.

The wheel is built once per session; each virtualenv installs it with its dependencies from the
package index (pip's cache makes reruns quick).  In each: ``import``, ``asyncsdk --help``, and the
pytest of a small host project whose suite the SDK's pytest plugin must not break.  Without
Pillow, what needs it says in one line which extra to install, and ``process`` still works
against a running service (the sandbox of this test process stands in for it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from built_once import built_once

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HOST_PROJECT = Path(__file__).resolve().parent / "host_project"
PIP_TIMEOUT = 600
MISSING_PILLOW = (
    "error: the sandbox needs Pillow, which is not installed: pip install 'asyncsdk[sandbox]'"
)


def _clean_env() -> dict[str, str]:
    """The environment of a child: nothing of this test run's virtualenv or settings."""
    dropped = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"}
    return {
        k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("ASYNCSDK_")
    }


def _run(
    args: list[str | Path], *, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"{result.args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once for the run."""

    def build(out: Path) -> None:
        _ok(
            _run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", out, ROOT],
                cwd=out,
                timeout=PIP_TIMEOUT,
            )
        )

    (built,) = built_once(tmp_path_factory, "wheel", build).glob("asyncsdk-*.whl")
    return built


#: Prints the version of a final release with the GIL ("3 13"), or nothing.
_PROBE = (
    "import sys, sysconfig\n"
    "if sys.version_info.releaselevel == 'final' and not sysconfig.get_config_var("
    "'Py_GIL_DISABLED'):\n"
    "    print(*sys.version_info[:2])"
)


def _newest_python() -> str:
    """The newest released CPython from 3.12 on that this machine runs (pyenv's included).

    Users run the SDK on every Python it supports, and from 3.12 ``isinstance`` against a
    runtime-checkable protocol never calls ``__getattr__``, so duck-typed file objects that
    forward through it behave differently there.  Without one, this run's Python stands in,
    except under ``CI=true``, where that fails.
    """
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    newest: tuple[tuple[int, ...], str] | None = None
    for minor in range(12, 20):
        candidates = [str(p / "bin" / "python3") for p in sorted(pyenv.glob(f"3.{minor}.*"))]
        candidates += filter(None, [shutil.which(f"python3.{minor}")])
        for python in candidates:
            try:
                probe = _run([python, "-c", _PROBE], cwd=Path.cwd())
            except OSError:
                continue  # a folder without its interpreter
            if probe.returncode != 0 or not probe.stdout.strip():
                continue  # a pyenv shim of a version not selected, a pre-release, free-threaded
            version = tuple(int(part) for part in probe.stdout.split())
            if newest is None or version > newest[0]:
                newest = (version, python)
    if newest is None:
        reason = "no CPython 3.12 or newer on this machine: pyenv install 3.13"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        return sys.executable
    return newest[1]


def _venv(wheel: Path, folder: Path, extra: str, *, interpreter: str = sys.executable) -> Path:
    """A fresh virtualenv of ``interpreter`` holding the wheel (with ``extra``), pytest and
    pytest-asyncio."""
    _ok(_run([interpreter, "-m", "venv", "--without-pip", folder], cwd=folder.parent))
    python = folder / "bin" / "python"
    requirement = (
        f"asyncsdk[{extra}] @ {wheel.as_uri()}" if extra else f"asyncsdk @ {wheel.as_uri()}"
    )
    # This run's pip installs into the new environment, which saves a copy of pip in each.
    _ok(
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                python,
                "install",
                "--quiet",
                requirement,
                "pytest",
                "pytest-asyncio",
            ],
            cwd=folder.parent,
            timeout=PIP_TIMEOUT,
        )
    )
    return folder / "bin"


def _host_pytest(bin_dir: Path, tmp_path: Path, *options: str) -> str:
    """Run the host project's own suite; its output."""
    project = tmp_path / "host_project"
    if not project.exists():
        shutil.copytree(HOST_PROJECT, project)
    return _ok(
        _run([bin_dir / "python", "-m", "pytest", "-p", "no:cacheprovider", *options], cwd=project)
    )


def _installed(bin_dir: Path, cwd: Path) -> set[str]:
    """The names of the distributions in the virtualenv, lower case."""
    listing = _ok(
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                bin_dir / "python",
                "list",
                "--format=freeze",
            ],
            cwd=cwd,
        )
    )
    return {line.split("==")[0].lower() for line in listing.splitlines() if "==" in line}


def _first_steps(bin_dir: Path, cwd: Path) -> None:
    """Import, and the command line's help."""
    _ok(_run([bin_dir / "python", "-c", "import asyncsdk, webhooks, asyncsdk.sandbox"], cwd=cwd))
    help_text = _ok(_run([bin_dir / "asyncsdk", "--help"], cwd=cwd))
    for command in ("demo", "process", "tools", "widgets", "sandbox", "receiver"):
        assert command in help_text


async def _cli(bin_dir: Path, *args: str | Path, env: dict[str, str]) -> tuple[int, str, str]:
    """``asyncsdk ARGS`` without blocking the loop (a sandbox of this process keeps serving)."""
    proc = await asyncio.create_subprocess_exec(
        bin_dir / "asyncsdk",
        *[str(a) for a in args],
        env={**_clean_env(), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _receiver_starts_and_stops(bin_dir: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        bin_dir / "asyncsdk",
        "receiver",
        "--port",
        "0",
        env=_clean_env(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line.startswith("receiver listening on http://127.0.0.1:")
    finally:
        proc.terminate()
        await proc.wait()
    assert proc.returncode == 0  # SIGTERM stops it cleanly


async def test_the_core_install_runs_everything_but_the_sandbox(
    wheel: Path, tmp_path: Path
) -> None:
    bin_dir = _venv(wheel, tmp_path / "venv", "")
    installed = _installed(bin_dir, tmp_path)
    assert {"aiohttp", "attrs", "cattrs", "yarl"} <= installed
    assert not {"pillow", "redis", "hiredis"} & installed
    _first_steps(bin_dir, tmp_path)

    # The plugin loads into the host's suite without Pillow; the host's fixture test is skipped.
    report = _host_pytest(bin_dir, tmp_path)
    assert "asyncsdk-" in report  # "plugins: ..., asyncsdk-0.1.0": the plugin was loaded
    assert "1 passed, 1 skipped" in report

    code, out, err = await _cli(bin_dir, "demo", "--out", tmp_path / "demo", env={})
    assert (code, out, err) == (2, "", MISSING_PILLOW + "\n")
    # The emulator's own entry point says the same, in one line.
    served = _run([bin_dir / "python", "-m", "asyncsdk.sandbox", "--port", "0"], cwd=tmp_path)
    assert (served.returncode, served.stdout, served.stderr) == (2, "", MISSING_PILLOW + "\n")

    await _receiver_starts_and_stops(bin_dir)

    # A running service: this process's sandbox, reached over HTTP like any other.
    photo = tmp_path / "kitchen.jpg"
    shutil.copy(samples.path("kitchen.jpg"), photo)
    async with Sandbox(SandboxConfig(pending_delay=0.0, processing_delay=0.1)) as sb:
        env = {"ASYNCSDK_API_KEY": sb.api_key, "ASYNCSDK_BASE_URL": sb.base_url}
        code, out, err = await _cli(bin_dir, "tools", env=env)
        assert code == 0, err
        assert "tool-image-enhancement" in out
        code, out, err = await _cli(bin_dir, "widgets", "tool-virtual-staging", env=env)
        assert code == 0, err
        assert "space" in out
        out_dir = tmp_path / "results"
        code, out, err = await _cli(
            bin_dir,
            "process",
            "tool-image-enhancement",
            photo,
            "-w",
            "space=indoor",
            "--out",
            out_dir,
            env=env,
        )
        assert code == 0, err
        assert sb.stats.processes_created == 1
    results = [p.name for p in out_dir.iterdir() if p.suffix == ".jpg"]
    assert len(results) == 1
    assert results[0].startswith("kitchen--image-enhancement")


def test_the_redis_extra_brings_redis_and_no_pillow(wheel: Path, tmp_path: Path) -> None:
    bin_dir = _venv(wheel, tmp_path / "venv", "redis")
    installed = _installed(bin_dir, tmp_path)
    assert {"redis", "hiredis"} <= installed
    assert "pillow" not in installed
    _first_steps(bin_dir, tmp_path)
    _ok(_run([bin_dir / "python", "-c", "import redis.asyncio, hiredis"], cwd=tmp_path))
    assert "1 passed, 1 skipped" in _host_pytest(bin_dir, tmp_path)


def test_the_sandbox_extra_runs_the_demo_and_the_fixture_on_the_newest_python(
    wheel: Path, tmp_path: Path
) -> None:
    bin_dir = _venv(wheel, tmp_path / "venv", "sandbox", interpreter=_newest_python())
    installed = _installed(bin_dir, tmp_path)
    assert "pillow" in installed
    assert "redis" not in installed
    _first_steps(bin_dir, tmp_path)
    assert "3 passed" in _host_pytest(bin_dir, tmp_path)
    out = _ok(_run([bin_dir / "asyncsdk", "demo", "--out", tmp_path / "demo"], cwd=tmp_path))
    assert "5 of 5 done" in out


def test_the_all_extra_runs_the_fixture_in_strict_and_auto_modes(
    wheel: Path, tmp_path: Path
) -> None:
    bin_dir = _venv(wheel, tmp_path / "venv", "all")
    assert {"pillow", "redis", "hiredis"} <= _installed(bin_dir, tmp_path)
    _first_steps(bin_dir, tmp_path)
    assert "3 passed" in _host_pytest(bin_dir, tmp_path, "-o", "asyncio_mode=strict")
    assert "3 passed" in _host_pytest(bin_dir, tmp_path, "-o", "asyncio_mode=auto")
