"""The sandbox's page at ``/_sandbox/``: its processes and webhook deliveries, live, as HTML.

Rendered on the server from the runtime's records (``ProcessRecord``, ``Delivery`` and its
``Attempt`` list); a few lines of script fetch ``/_sandbox/cockpit`` (the same HTML without the
page around it) every second and put it in place.  Deliveries that failed or are failing come
first, each with every attempt: when, how long, the receiver's status and answer or the error,
and the next try.  The thumbnails are served under ``/_sandbox/files/``, out of the counts and
chaos rules of the service's routes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from html import escape
from typing import Final

from aiohttp import web

from asyncsdk.sandbox._api import get_file
from asyncsdk.sandbox._files import EXTENSIONS
from asyncsdk.sandbox._http import runtime_of
from asyncsdk.sandbox._live import Runtime
from asyncsdk.sandbox._masking import mask_url
from asyncsdk.sandbox._records import ProcessRecord, StoredFile, utc_now
from asyncsdk.sandbox._stats import Attempt, Delivery

__all__ = ["add_routes", "render_panel"]

#: How many of the newest processes and deliveries the page shows (failed deliveries first).
SHOWN: Final = 200

STYLE: Final = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f5f6f8; }
header { background: #24324a; color: #fff; padding: 10px 24px; display: flex; gap: 16px;
  align-items: baseline; }
header h1 { font-size: 18px; margin: 0; }
header .live { margin-left: auto; font-size: 12px; opacity: .8; }
main { padding: 8px 24px 40px; max-width: 1300px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.summary { color: #4b5568; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e3e6ec;
  vertical-align: top; }
th { font-size: 12px; color: #4b5568; font-weight: 600; }
code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 8em;
  overflow: auto; }
img.thumb { height: 72px; border-radius: 3px; display: block; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  font-weight: 600; }
.bad { background: #fde2e1; color: #a01d16; }
.warn { background: #fff1d6; color: #8a5300; }
.good { background: #dcf5e3; color: #17663a; }
.wait { background: #e6eaf2; color: #3a4660; }
.delivery { background: #fff; border: 1px solid #e3e6ec; border-radius: 6px; margin: 10px 0;
  padding: 8px 12px; }
.delivery.failed { border-left: 4px solid #d0342c; }
.delivery.retrying { border-left: 4px solid #e59c00; }
.delivery.delivered { border-left: 4px solid #2f9e5a; }
.delivery h3 { font-size: 14px; margin: 0 0 6px; font-weight: 600; display: flex; gap: 10px;
  flex-wrap: wrap; align-items: baseline; }
.delivery table { margin-top: 4px; table-layout: fixed; }
.delivery th:nth-child(1) { width: 2em; }
.delivery th:nth-child(2) { width: 8em; }
.delivery th:nth-child(3) { width: 6em; }
.delivery th:nth-child(5) { width: 11em; }
header a { color: #cfe0ff; }
.muted { color: #6b7588; }
.empty { color: #6b7588; background: #fff; padding: 12px; border: 1px dashed #cdd2dc; }
"""

SCRIPT: Final = """
(() => {
  const panel = document.getElementById("cockpit");
  const live = document.getElementById("live");
  let last = null;
  async function refresh() {
    try {
      const answer = await fetch("/_sandbox/cockpit", { cache: "no-store" });
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      const html = await answer.text();
      if (html !== last) { last = html; panel.innerHTML = html; }
      live.textContent = "live: updated every second";
    } catch (error) {
      live.textContent = "the sandbox does not answer (stopped?)";
    }
  }
  setInterval(refresh, 1000);
})();
"""


def _seconds(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return ""
    return f"{((end or utc_now()) - start).total_seconds():.1f} s"


def _clock(moment: datetime | None) -> str:
    return "" if moment is None else moment.strftime("%H:%M:%S")


def _thumbnail(stored: StoredFile | None, label: str) -> str:
    if stored is None:
        return '<span class="muted">none</span>'
    src = f"/_sandbox/files/{stored.id}/thumbnail.{EXTENSIONS[stored.format]}"
    return f'<img class="thumb" src="{escape(src)}" alt="{escape(label)}" title="{escape(label)}">'


def _before(rt: Runtime, process: ProcessRecord) -> StoredFile | None:
    """The photo the process started from: its first input that is not a mask."""
    for asset_id in process.asset_map.values():
        asset = rt.state.assets.get(asset_id)
        if asset is not None and asset.role != "mask":
            return asset.file
    return None


PROCESS_BADGES: Final = {"done": "good", "failed": "bad", "processing": "warn"}


def _timings(process: ProcessRecord) -> str:
    pending = _seconds(process.created_at, process.started_at or process.finished_at)
    parts = [f"created {_clock(process.created_at)} UTC", f"pending {pending}"]
    if process.started_at is not None:
        parts.append(f"processing {_seconds(process.started_at, process.finished_at)}")
    if process.finished_at is not None:
        parts.append(f"total {_seconds(process.created_at, process.finished_at)}")
    return "<br>".join(escape(p) for p in parts)


def _processes(rt: Runtime) -> str:
    processes = sorted(rt.state.processes.values(), key=lambda p: p.created_at, reverse=True)
    if not processes:
        return '<p class="empty">No process yet: create one with a client of this sandbox.</p>'
    rows = []
    for process in processes[:SHOWN]:
        badge = PROCESS_BADGES.get(process.status, "wait")
        after = process.result.file if process.result is not None else None
        rows.append(
            f'<tr class="process" data-id="{escape(process.id)}">'
            f"<td><code>{escape(process.id)}</code><br>"
            f'<span class="muted">order {escape(process.order_id)}</span></td>'
            f"<td>{escape(process.tool_def.name)}<br><code>{escape(process.tool)}</code></td>"
            f'<td><span class="badge {badge}">{escape(process.status)}</span></td>'
            f"<td>{_timings(process)}</td>"
            f"<td>{_thumbnail(_before(rt, process), 'before')}</td>"
            f"<td>{_thumbnail(after, 'after')}</td></tr>"
        )
    return (
        "<table><tr><th>Process</th><th>Tool</th><th>Status</th><th>Timings</th>"
        f"<th>Before</th><th>After</th></tr>{''.join(rows)}</table>"
    )


def _state(delivery: Delivery) -> tuple[str, str]:
    """(CSS class, words) of where a delivery stands."""
    if delivery.delivered:
        return "delivered", "Delivered"
    if delivery.finished:
        return "failed", "Failed"
    if delivery.history:
        return "retrying", "Retrying"
    return "sending", "Sending"


DELIVERY_BADGES: Final = {
    "failed": "bad",
    "retrying": "warn",
    "sending": "wait",
    "delivered": "good",
}
#: Failed first, then failing (retrying), then under way, then delivered.
RANK: Final = {"failed": 0, "retrying": 1, "sending": 2, "delivered": 3}


def _answer(attempt: Attempt) -> str:
    if attempt.status is None:
        return f'<span class="badge bad">no answer</span> {escape(attempt.error)}'
    badge = "good" if 200 <= attempt.status < 300 else "bad"
    body = f"<pre>{escape(attempt.answer)}</pre>" if attempt.answer else ""
    return f'<span class="badge {badge}">HTTP {attempt.status}</span>{body}'


def _next(attempt: Attempt, delivery: Delivery) -> str:
    if attempt.status is not None and 200 <= attempt.status < 300:
        return "delivered"
    if attempt.retry_in is None:
        return "gave up" if delivery.finished else ""
    if attempt is delivery.history[-1] and not delivery.finished:
        sent = datetime.strptime(attempt.at, "%Y-%m-%dT%H:%M:%S.%fZ")
        return f"next try at {(sent + timedelta(seconds=attempt.retry_in)):%H:%M:%S}"
    return f"retried after {attempt.retry_in:g} s"


def _delivery(delivery: Delivery, max_attempts: int) -> str:
    kind, words = _state(delivery)
    rows = "".join(
        f'<tr><td>{a.number}</td><td title="{escape(a.at)}">{escape(a.at[11:23])}</td>'
        f"<td>{a.duration_ms:g} ms</td>"
        f"<td>{_answer(a)}</td><td>{escape(_next(a, delivery))}</td></tr>"
        for a in delivery.history
    )
    attempts = (
        "<table><tr><th>#</th><th>Sent (UTC)</th><th>Took</th><th>Answer</th><th>Then</th></tr>"
        f"{rows}</table>"
        if rows
        else '<p class="muted">first attempt under way</p>'
    )
    copy = f'<span class="muted">copy {delivery.copy + 1}</span>' if delivery.copy else ""
    resend = (
        f'<form method="post" action="/_sandbox/deliveries/{escape(delivery.id)}/resend">'
        '<button type="submit">Resend</button></form>'
        if kind == "failed"
        else ""
    )
    return (
        f'<div class="delivery {kind}" data-state="{kind}">'
        f'<h3><span class="badge {DELIVERY_BADGES[kind]}">{words}</span>'
        f"<code>{escape(mask_url(delivery.url))}</code>"
        f'<span class="muted">process {escape(delivery.process_id)} '
        f"({escape(delivery.status)}), {delivery.attempts} of {max_attempts} attempts</span>"
        f"{copy}{resend}</h3>{attempts}</div>"
    )


def _deliveries(rt: Runtime) -> str:
    deliveries = list(enumerate(rt.stats.deliveries))
    if not deliveries:
        urls = rt.webhook_urls
        where = (
            "to " + ", ".join(f"<code>{escape(mask_url(u))}</code>" for u in urls)
            if urls
            else "anywhere: no webhook URL is set (--webhook URL, or POST /_sandbox/webhooks)"
        )
        return f'<p class="empty">No delivery yet; finished processes are delivered {where}.</p>'
    deliveries.sort(key=lambda item: (RANK[_state(item[1])[0]], -item[0]))
    max_attempts = max(1, rt.config.webhook_max_attempts)
    return "".join(_delivery(d, max_attempts) for _, d in deliveries[:SHOWN])


def _summary(items: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "none"


def render_panel(rt: Runtime) -> str:
    """The live part of the page: the processes and the deliveries."""
    processes = _summary(p.status for p in rt.state.processes.values())
    deliveries = _summary(_state(d)[1].lower() for d in rt.stats.deliveries)
    return (
        f'<h2 id="deliveries">Webhook deliveries</h2><p class="summary">{escape(deliveries)}</p>'
        f"{_deliveries(rt)}"
        f'<h2 id="processes">Processes</h2><p class="summary">{escape(processes)}</p>'
        f"{_processes(rt)}"
    )


def render_page(rt: Runtime, base: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>asyncsdk sandbox</title><style>{STYLE}</style></head><body>"
        f"<header><h1>asyncsdk sandbox</h1><span>{escape(base)}</span>"
        '<a href="#deliveries">Webhook deliveries</a><a href="#processes">Processes</a>'
        '<span class="live" id="live">live: updated every second</span></header>'
        f'<main id="cockpit">{render_panel(rt)}</main>'
        f"<script>{SCRIPT}</script></body></html>"
    )


async def cockpit_page(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    return web.Response(
        text=render_page(rt, str(request.url.origin())),
        content_type="text/html",
        headers={"Cache-Control": "no-store"},
    )


async def cockpit_panel(request: web.Request) -> web.Response:
    return web.Response(
        text=render_panel(runtime_of(request)),
        content_type="text/html",
        headers={"Cache-Control": "no-store"},
    )


async def to_the_page(request: web.Request) -> web.Response:
    """``/_sandbox`` typed without its slash: the page is at ``/_sandbox/``."""
    raise web.HTTPFound("/_sandbox/")


def add_routes(router: web.UrlDispatcher) -> None:
    """``/_sandbox/`` (the page; ``/_sandbox`` leads there), ``/_sandbox/cockpit`` (its live
    part), the thumbnails."""
    router.add_get("/_sandbox/", cockpit_page)
    router.add_get("/_sandbox", to_the_page)
    router.add_get("/_sandbox/cockpit", cockpit_panel)
    router.add_get("/_sandbox/files/{file_id}/{variant}", get_file)
