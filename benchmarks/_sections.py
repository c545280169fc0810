"""The eight sections, by key: each runs its helper processes and returns its part of the report."""

from __future__ import annotations

import time
from collections.abc import Callable

from benchmarks._asgi_section import run_asgi
from benchmarks._client_section import run_client
from benchmarks._e2e_section import run_e2e
from benchmarks._env import cpu_ticks, steal_share
from benchmarks._observe_section import run_observe
from benchmarks._plan import Plan
from benchmarks._receiver_section import run_receiver
from benchmarks._registry_section import run_registry
from benchmarks._shared import Section
from benchmarks._upload_section import run_upload
from benchmarks.redis_server_cpu import run_redis

RUNNERS: dict[str, Callable[[Plan], Section]] = {
    "client": run_client,
    "upload": run_upload,
    "receiver": run_receiver,
    "registry": run_registry,
    "e2e": run_e2e,
    "observe": run_observe,
    "asgi": run_asgi,
    "redis": lambda plan: run_redis(plan.runs, plan.redis_deliveries),
}


def run_section(key: str, plan: Plan) -> Section:
    started, ticks = time.monotonic(), cpu_ticks()
    section = RUNNERS[key](plan)
    section.seconds = time.monotonic() - started
    section.steal = steal_share(ticks, cpu_ticks())
    return section
