"""The soak's verdict and its Markdown report (``benchmarks/SOAK.md``)."""

from __future__ import annotations

import textwrap
from typing import Any

from benchmarks.soak._node import WORKERS


def verdict(result: dict[str, Any]) -> list[str]:
    """What must hold; empty when everything does."""
    problems = []
    for name in (
        "lost",
        "gave_up",
        "valid_rejected",
        "malformed_accepted",
        "repeated_calls",
        "rerun_otherwise",
        "malformed_handled",
        "unknown_handled",
        "dead_letters",
        "waiters_unresolved_of_200",
    ):
        if result[name]:
            problems.append(f"{name} = {result[name]}")
    if result["rerun_after_kill"] > WORKERS:
        problems.append(f"rerun_after_kill = {result['rerun_after_kill']} > {WORKERS} workers")
    return problems


def render(result: dict[str, Any]) -> str:
    calls = result["handler_calls_per_valid_event"]
    once = calls.get("1", 0)
    lat = result["ack_latency_ms"]
    problems = verdict(result)
    rows = [
        ("Deliveries sent", f"{result['events']:,}"),
        (
            "of which new / duplicate / malformed",
            f"{result['new_valid_events']:,} / {result['duplicates_sent']:,} / "
            f"{result['malformed_sent']:,}",
        ),
        ("Load held (deliveries/s, first send to last ack)", f"{result['events_per_s']:,}"),
        (
            "Valid events handled per second (first send to empty inbox)",
            f"{result['handled_per_s']:,}",
        ),
        ("Wall time of the sending phase", f"{result['elapsed_s']} s"),
        (
            "Ack latency seen by the sender p50 / p99 / max",
            f"{lat['p50']} / {lat['p99']} / {lat['max']} ms",
        ),
        (
            "Ack latency p99 inside each receiver",
            ", ".join(f"{k}: {v} ms" for k, v in result["receiver_ack_latency_p99_ms"].items()),
        ),
        ("**Events lost**", f"**{result['lost']}**"),
        (
            "**Handler calls per valid event** (effects committed with the ack)",
            f"**exactly 1 for {once:,} of {result['new_valid_events']:,}**; "
            + ", ".join(f"{k}: {v}" for k, v in calls.items() if k != "1")
            if len(calls) > 1
            else f"**exactly 1 for all {once:,}**",
        ),
        (
            "Handler runs per valid event (started, committed or not)",
            ", ".join(f"{k}: {v:,}" for k, v in result["handler_runs_per_valid_event"].items()),
        ),
        (
            "Runs again of entries the killed process had started (their writes never applied)",
            result["rerun_after_kill"],
        ),
        ("Runs again for any other reason", result["rerun_otherwise"]),
        (
            "Malformed deliveries answered 4xx / reaching a handler",
            f"{result['malformed_rejected']:,} / {result['malformed_handled']}",
        ),
        ("Valid deliveries refused", result["valid_rejected"]),
        ("Deliveries retried by the sender (kill, restart)", f"{result['retried_deliveries']:,}"),
        ("Dead letters", result["dead_letters"]),
        ("Waiters (RedisRegistry) unresolved, of 200 sampled", result["waiters_unresolved_of_200"]),
        (
            "Events stored but not yet handled at the last ack / drained in",
            f"{result['backlog_at_last_ack']:,} / {result['drained_in_s']} s",
        ),
        ("Tracebacks in the receivers' logs", result["receiver_tracebacks"]),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    summary = (
        "**pass**: nothing lost, no handler call for a duplicate or a malformed delivery, "
        "no dead letter."
        if not problems
        else "**FAIL**: " + "; ".join(problems)
    )
    timeline = result["timeline_s"]
    m = result["machine"]
    workers = result["workers_per_receiver"]
    setup = (
        f"Three receiver processes (`WebhookReceiver` with `RedisInbox` + `RedisRegistry` under "
        f"one prefix, `TokenVerifier` in the path, {workers} workers each, claim timeout "
        f"{result['claim_timeout_s']} s) behind a round-robin sender with "
        f"{result['concurrency']} deliveries in flight that, like the service, retries every "
        f"non-2xx or broken connection on the next process. Process 2 got SIGKILL at "
        f"{timeline.get('killed_at', '?')} s (a third of the deliveries done) and a new process "
        f"joined at {timeline.get('restarted_at', '?')} s (two thirds done). Machine: "
        f"{m['cpus']} CPUs, Python {m['python']}, {m['platform']}; the sender, the receivers and "
        f"Redis share it (load average {m['load_average_after']} at the end of the run)."
    )
    notes = [
        "*Lost* counts valid events that never reached the handler, acknowledged or not. The "
        "inbox stores before it answers 2xx, so an event acknowledged by the killed process is "
        "still handled: its claim times out and another process takes it over.",
        "*Handler calls per valid event* counts committed effects: the handler is registered "
        "with `atomic=True` and queues its `HINCRBY` on a `RedisWrites`, which the inbox applies "
        "in the same script as the ack, and only while the process still holds the entry. An "
        "entry the killed process had started is handed out again after its claim times out "
        "and runs a second time (the *runs* row: at most "
        f"{workers} of them, each first run by the killed process), but the killed run's writes "
        "were never applied, so every effect lands once. Duplicates sent by the service never "
        "reach a handler: the dedup claim is one atomic `SET NX` shared by all processes.",
        (
            "The receivers acknowledged faster than their handlers finished (each handled event "
            "costs a claim, the registry's `SET NX` + `PUBLISH` heard by every process, the "
            "handler's own note of its run, and the ack with the handler's writes), so a backlog "
            "built while the load lasted and drained after it. "
            if result["backlog_at_last_ack"]
            else "The workers kept up: nothing was waiting when the last delivery was "
            "acknowledged, so the handled rate is the valid share of the load, not a limit of "
            "the workers. "
        )
        + "This run set `queue_limit` high; with the default (10,000 unfinished events) "
        "receivers that fall behind answer 503 with `Retry-After` instead and the service "
        "retries.",
        f"Latency is measured by the sender around each POST, at {result['concurrency']} in "
        "flight; it includes the durable store (one Redis script) before the 2xx. The "
        "receivers' own figure is the upper bound of their histogram bucket.",
    ]
    bullets = "\n".join(
        textwrap.fill(
            note,
            width=100,
            initial_indent="- ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        for note in notes
    )
    return f"""# Webhook soak

Reproduce (Redis on 127.0.0.1:6379, from the repository root):

```
{result["command"]}
```

{textwrap.fill(setup, width=100, break_on_hyphens=False)}

| Measure | Result |
|---|---|
{table}

Verdict: {summary}

How to read it:

{bullets}
"""
