"""The sandbox-only control routes under ``/_sandbox/``: health, stats, settings, chaos rules,
webhook URLs, the process clock and waiting for idle.

They need no API key, chaos never applies to them and they are not counted in ``stats.requests``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
from aiohttp import web

from asyncsdk.sandbox._http import json_body, runtime_of
from asyncsdk.sandbox._records import SandboxError
from asyncsdk.sandbox._runtime import Runtime

__all__ = ["add_routes"]


def _config_json(rt: Runtime) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, frozenset | set):
            return sorted(value)
        if isinstance(value, tuple):
            return list(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return {k: plain(v) for k, v in attrs.asdict(rt.config, recurse=False).items()}


def _control_error(message: str) -> SandboxError:
    return SandboxError(400, "api_error_invalid_field", message)


async def sandbox_stats(request: web.Request) -> web.Response:
    return web.json_response(runtime_of(request).stats.wire())


async def sandbox_get_config(request: web.Request) -> web.Response:
    return web.json_response(_config_json(runtime_of(request)))


async def sandbox_patch_config(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise _control_error("send a JSON object of settings to change")
    try:
        rt.config.update(body)
    except (ValueError, TypeError) as exc:
        raise _control_error(str(exc)) from None
    return web.json_response(_config_json(rt))


async def sandbox_add_chaos(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    body = await json_body(request)
    if not isinstance(body, dict):
        raise _control_error("send a JSON object describing the chaos rule")
    allowed = {"method", "path", "kind", "status", "times", "probability", "retry_after", "delay"}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise _control_error(f"unknown chaos field(s) {unknown}; known: {sorted(allowed)}")
    try:
        rule = rt.chaos.add(**body)
    except (ValueError, TypeError) as exc:
        raise _control_error(str(exc)) from None
    return web.json_response(rule.wire(), status=201)


async def sandbox_list_chaos(request: web.Request) -> web.Response:
    return web.json_response({"rules": [r.wire() for r in runtime_of(request).chaos.rules]})


async def sandbox_clear_chaos(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    count = len(rt.chaos.rules)
    rt.chaos.clear()
    return web.json_response({"cleared": count})


async def sandbox_add_webhook(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    body = await json_body(request)
    url = body.get("url") if isinstance(body, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise _control_error('send {"url": "https://..."} (http is accepted by the sandbox)')
    if url not in rt.registered_webhooks:
        rt.registered_webhooks.append(url)
    return web.json_response({"webhook_urls": rt.webhook_urls}, status=201)


async def sandbox_wait_idle(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    try:
        timeout = float(request.query.get("timeout", "30"))
    except ValueError:
        raise _control_error("timeout must be a number of seconds") from None
    try:
        await asyncio.wait_for(rt.wait_idle(), timeout)
    except TimeoutError:
        return web.json_response({"idle": False}, status=408)
    return web.json_response({"idle": True})


async def sandbox_advance(request: web.Request) -> web.Response:
    runtime_of(request).advance()
    return web.json_response({"advanced": True})


async def sandbox_health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "base_url": str(request.url.origin())})


def add_routes(router: web.UrlDispatcher) -> None:
    """The ``/_sandbox/`` routes."""
    router.add_get("/_sandbox/health", sandbox_health)
    router.add_get("/_sandbox/stats", sandbox_stats)
    router.add_get("/_sandbox/config", sandbox_get_config)
    router.add_patch("/_sandbox/config", sandbox_patch_config)
    router.add_get("/_sandbox/chaos", sandbox_list_chaos)
    router.add_post("/_sandbox/chaos", sandbox_add_chaos)
    router.add_delete("/_sandbox/chaos", sandbox_clear_chaos)
    router.add_post("/_sandbox/webhooks", sandbox_add_webhook)
    router.add_post("/_sandbox/wait-idle", sandbox_wait_idle)
    router.add_post("/_sandbox/advance", sandbox_advance)
