"""``python -m benchmarks.widget_path [--calls N] [--rounds N]``: what a widget name costs on its
way to the wire, in CPU and in files.

* **CPU per checked plan**: ``client.processes.prepare(...)`` of the client section's request (its
  wire-form ``widgets``) and of the same request in the short form (``{"space": "bedroom", ...}``),
  against the sandbox, the catalogue cached after the first call; ``time.process_time()`` over
  ``--calls`` calls, the median of ``--rounds``.  Planning is the part of a checked
  ``processes.create`` that raw aiohttp does not do.
* **The walk**: the value of ``widgets=`` followed through one ``client.run()``: the package's
  files of the calls that hold it, or a value the catalogue layer made from it, in their locals,
  in call order (consecutive calls in one file count once); how many files it enters, and how
  many times it comes back to a file it left.

To measure another tree's package: ``PYTHONPATH=<that tree> python benchmarks/widget_path.py``
(run as a file, so that this tree does not come first on the path).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Final

from benchmarks._client_bench import TOOL, WIDGETS, asset_map

SHORT: Final = {"space": "bedroom", "style": "modern"}


async def plan_cost(calls: int, rounds: int) -> dict[str, list[float]]:
    """CPU microseconds per checked ``prepare``, each round, per form of ``widgets``."""
    from asyncsdk import Client
    from asyncsdk.sandbox import Sandbox

    costs: dict[str, list[float]] = {}
    async with (
        Sandbox() as sandbox,
        Client(api_key=sandbox.api_key, base_url=sandbox.base_url) as client,
    ):
        forms: dict[str, Any] = {"wire": WIDGETS, "short": SHORT}
        for label, widgets in forms.items():
            await client.processes.prepare(TOOL, asset_map(1), widgets)  # the catalogue, cached
            for _ in range(rounds):
                started = time.process_time()
                for _ in range(calls):
                    await client.processes.prepare(TOOL, asset_map(1), widgets)
                costs.setdefault(label, []).append((time.process_time() - started) / calls * 1e6)
    return costs


def _follower(widgets: dict[str, str], root: str) -> tuple[list[str], Callable[..., None]]:
    tracked: dict[int, object] = {id(widgets): widgets}
    for key, value in widgets.items():
        tracked[id(key)] = key
        tracked[id(value)] = value
    files: list[str] = []
    started: dict[int, FrameType] = {}

    def holds(frame: FrameType) -> bool:
        return any(id(value) in tracked for value in frame.f_locals.values())

    def profile(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_filename
        if not name.startswith(root) or "/sandbox/" in name:
            return
        if event == "call" and id(frame) not in started and holds(frame):
            started[id(frame)] = frame  # held, so that no later frame reuses its id
            files.append(str(Path(name).relative_to(root)))
        elif (
            event == "return"
            and not isinstance(arg, bool | int | float | type(None))
            and "/_catalogue/" in name
            and holds(frame)
        ):
            tracked[id(arg)] = arg
            if isinstance(arg, list | tuple):
                for item in arg:
                    tracked[id(item)] = item

    return files, profile


async def walk() -> list[str]:
    """The files, in call order, that the value of ``widgets=`` passes through in ``run()``."""
    import asyncsdk
    from asyncsdk import Client, ToolSlug, samples
    from asyncsdk.sandbox import Sandbox

    root = str(Path(asyncsdk.__file__).parent)
    async with (
        Sandbox() as sandbox,
        Client(api_key=sandbox.api_key, base_url=sandbox.base_url, generation_limit=None) as client,
    ):
        await client.catalogue.catalogue(ToolSlug.VIRTUAL_STAGING)
        widgets = dict(SHORT)
        files, profile = _follower(widgets, root)
        photo = samples.path(samples.NAMES[0])
        sys.setprofile(profile)
        try:
            await client.run(ToolSlug.VIRTUAL_STAGING, photo, widgets=widgets, timeout=60)
        finally:
            sys.setprofile(None)
    return [name for index, name in enumerate(files) if index == 0 or files[index - 1] != name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.widget_path")
    parser.add_argument("--calls", type=int, default=5000, help="prepare calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per form of widgets")
    args = parser.parse_args(argv)
    import asyncsdk

    print(f"asyncsdk from {Path(asyncsdk.__file__).parent}")
    for label, costs in asyncio.run(plan_cost(args.calls, args.rounds)).items():
        shown = ", ".join(f"{cost:.1f}" for cost in costs)
        print(
            f"CPU per checked prepare, {label} widgets: {statistics.median(costs):.1f} us ({shown})"
        )
    visits = asyncio.run(walk())
    counts = Counter(visits)
    print(
        f"widgets= through run(): {len(counts)} files entered, "
        f"{sum(count - 1 for count in counts.values())} returns to a file left before"
    )
    print("  " + " -> ".join(visits))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
