"""One load against the receiver's server: wrk when installed, else the Python generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks._procs import CLIENT_CPU, Child, ChildError, reaped_cpu, run_job, which


def _wrk(url: str, connections: int, seconds: int, script: Path) -> dict[str, Any]:
    wrk = which("wrk")
    assert wrk is not None
    argv = [
        wrk,
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    cpu = reaped_cpu()
    child = Child("wrk", argv=argv, cpu=CLIENT_CPU)
    try:
        out = child.output(timeout=seconds + 60)
    finally:
        child.stop()
    cpu = reaped_cpu() - cpu
    for line in out.splitlines():
        if line.startswith("WRKJSON "):
            data: dict[str, Any] = json.loads(line[len("WRKJSON ") :])
            return {**data, "cpu_s": cpu}
    raise ChildError(f"wrk printed no result:\n{out[-2000:]}")


def run_load(
    url: str, connections: int, seconds: int, folder: Path, run: str, delay_ms: int | None
) -> tuple[dict[str, Any], str]:
    """One load against ``url``: the generator's figures (its own CPU seconds in ``cpu_s``),
    and which generator ran it."""
    from benchmarks._receiver_bench import lua_script

    if which("wrk") is not None:
        script = folder / f"{run}.lua"
        script.write_text(lua_script(run, delay_ms))
        return _wrk(url, connections, seconds, script), "wrk"
    result = run_job(
        "_receiver_bench:loadgen",
        {
            "url": url,
            "connections": connections,
            "duration": seconds,
            "run": run,
            "delay_ms": delay_ms,
        },
        cpu=CLIENT_CPU,
        timeout=seconds + 120,
    )
    return result, "python"
