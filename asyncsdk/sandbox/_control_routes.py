"""The sandbox-only control routes under ``/_sandbox/``: health, stats, settings, chaos rules,
webhook URLs, the process clock and waiting for idle.

They need no API key, chaos never applies to them and they are not counted in ``stats.requests``.
They answer local callers only (:func:`require_local`), and their bodies must be declared JSON.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Collection
from typing import Any

import attrs
from aiohttp import web
from yarl import URL

from asyncsdk.sandbox._config import check_webhook_url
from asyncsdk.sandbox._http import json_body, runtime_of
from asyncsdk.sandbox._live import Runtime
from asyncsdk.sandbox._records import SandboxError

__all__ = ["add_routes", "require_local"]


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


# ------------------------------------------------------------------ who may call them


def _is_local_name(name: str, extra: Collection[str]) -> bool:
    """``localhost``, ``*.localhost`` (RFC 6761), a loopback address, or a name of ``extra``."""
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    if name in {e.lower().rstrip(".") for e in extra}:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _hostname(value: str) -> str | None:
    """The host part of a ``Host`` header or an ``Origin``, or ``None`` when it has none."""
    try:
        url = URL(value if "://" in value else f"http://{value}")
    except ValueError:
        return None
    return url.host


def require_local(request: web.Request, control_hosts: Collection[str]) -> None:
    """Refuse what a web page open in the developer's browser could send to a control route.

    A page of another site may POST a ``text/plain`` body to ``http://127.0.0.1:<port>`` (a
    "simple" request needs no permission), or make its own name resolve to 127.0.0.1 and read the
    answers (DNS rebinding).  Browsers name the page in ``Origin`` and its name in ``Host``; other
    clients send no ``Origin`` and address the sandbox by a local name or an IP address.  So:
    ``Host`` must be an IP address, ``localhost`` or one of ``control_hosts``, and an ``Origin``,
    when sent, must be ``localhost``, a loopback address or one of ``control_hosts``.
    """
    host = _hostname(request.host)
    if host is None or not (_is_address(host) or _is_local_name(host, control_hosts)):
        raise SandboxError(
            403,
            "api_error_forbidden",
            f"the sandbox's control routes answer only requests addressed to localhost or an IP "
            f"address, not to {request.host!r}; add the name to the control_hosts setting "
            "(--control-host) if the sandbox runs behind it",
        )
    origin = request.headers.get("Origin")
    if origin is None:
        return
    name = _hostname(origin)
    if name is None or not _is_local_name(name, control_hosts):
        raise SandboxError(
            403,
            "api_error_forbidden",
            f"the sandbox's control routes refuse requests from web pages of other sites "
            f"(Origin {origin!r}); call them from a test or a shell",
        )


async def _control_json(request: web.Request) -> Any:
    """The JSON body of a control request, whose ``Content-Type`` must say ``application/json``
    (a web page of another site cannot send that without the browser asking first)."""
    if request.content_type != "application/json":
        sent = request.headers.get("Content-Type") or "no content type"
        raise SandboxError(
            415,
            "api_error_unsupported_media_type",
            f"send the body as JSON with Content-Type: application/json, not {sent}",
        )
    return await json_body(request)


async def sandbox_stats(request: web.Request) -> web.Response:
    return web.json_response(runtime_of(request).stats.wire())


async def sandbox_get_config(request: web.Request) -> web.Response:
    return web.json_response(_config_json(runtime_of(request)))


async def sandbox_patch_config(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    body = await _control_json(request)
    if not isinstance(body, dict):
        raise _control_error("send a JSON object of settings to change")
    try:
        rt.config.update(body)
    except (ValueError, TypeError) as exc:
        raise _control_error(str(exc)) from None
    return web.json_response(_config_json(rt))


async def sandbox_add_chaos(request: web.Request) -> web.Response:
    rt = runtime_of(request)
    body = await _control_json(request)
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
    body = await _control_json(request)
    url = body.get("url") if isinstance(body, dict) else None
    if not isinstance(url, str):
        raise _control_error('send {"url": "https://..."} (http is accepted by the sandbox)')
    try:
        check_webhook_url(url)
    except ValueError as exc:
        raise _control_error(f"webhook URL {exc}") from None
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


async def sandbox_resend(request: web.Request) -> web.Response:
    """Deliver a given-up delivery again; a form POST of the page is sent back to the page."""
    delivery_id = request.match_info["delivery_id"]
    try:
        record = runtime_of(request).resend(delivery_id)
    except KeyError:
        raise _control_error(f"no delivery {delivery_id}; the ids are in /_sandbox/stats") from None
    except ValueError as exc:
        raise _control_error(str(exc)) from None
    if request.content_type == "application/x-www-form-urlencoded":
        raise web.HTTPSeeOther("/_sandbox/")
    return web.json_response(record.wire())


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
    router.add_post("/_sandbox/deliveries/{delivery_id}/resend", sandbox_resend)
