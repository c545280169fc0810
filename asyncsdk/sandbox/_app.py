"""The aiohttp application of the sandbox: one handler per endpoint of spec section 4.

Handlers parse the request, call :class:`~asyncsdk.sandbox._state.SandboxState` and write wire JSON
(``_wire.py``).  One middleware counts requests, carries out chaos rules, turns
:class:`SandboxError` into ``{"error": ..., "key": ...}`` answers, and is the only place that
knows about the success envelope.  Uploads are streamed to disk chunk by chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final

import attrs
from aiohttp import BodyPartReader, web

from asyncsdk.sandbox import _images
from asyncsdk.sandbox._chaos import ChaosKind, ChaosRule
from asyncsdk.sandbox._files import EXTENSIONS
from asyncsdk.sandbox._runtime import Runtime
from asyncsdk.sandbox._state import (
    RATE_LIMIT_MESSAGE,
    SandboxError,
    StoredFile,
    parse_listing,
    parse_size,
    resolve_roles,
)
from asyncsdk.sandbox._wire import Urls, asset_json, order_json, process_json, project_json

__all__ = ["RUNTIME", "build_app"]

RUNTIME: Final = web.AppKey("runtime", Runtime)
CHUNK: Final = 64 * 1024
MAX_FIELD_BYTES: Final = 64 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HTML_PAGE: Final = (
    "<html>\r\n<head><title>{status} Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>{status} Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


def _rt(request: web.Request) -> Runtime:
    return request.app[RUNTIME]


def _key(request: web.Request) -> str:
    return _rt(request).state.authenticate(request.headers.get("x-api-key"))


def _urls(request: web.Request, *, sized: bool = False) -> Urls:
    base = str(request.url.origin())
    if not sized:
        return Urls(base)
    width, height = parse_size(request.query)
    return Urls(base, width=width, height=height)


def _ok(request: web.Request, payload: dict[str, Any], status: int = 200) -> web.Response:
    """A success answer, bare or in the live API's envelope (``enveloped`` setting)."""
    if _rt(request).config.enveloped:
        if "data" in payload:
            payload = {**payload, "message": "ok"}
        else:
            payload = {"data": payload, "message": "ok"}
    return web.json_response(payload, status=status)


def _error(
    status: int, body: dict[str, str], headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (ValueError, UnicodeDecodeError):
        raise SandboxError(
            400, "api_error_invalid_json", "the body is not valid JSON; send application/json"
        ) from None


# --------------------------------------------------------------------- middleware


def _route(request: web.Request) -> str:
    route = request.match_info.route
    resource = route.resource
    return resource.canonical if resource is not None else request.path


def _drop(request: web.Request) -> web.Response:
    """Close the connection without an answer (the write of the returned response fails quietly)."""
    if request.transport is not None:
        request.transport.close()
    return web.Response(status=204)


async def _before(request: web.Request, rule: ChaosRule) -> web.StreamResponse | None:
    headers = {}
    if rule.retry_after is not None:
        headers["Retry-After"] = str(rule.retry_after)
    if rule.kind == ChaosKind.STATUS:
        status = rule.effective_status
        return _error(
            status,
            {"error": f"sandbox chaos: HTTP {status}", "key": "api_error_service_unavailable"},
            headers,
        )
    if rule.kind == ChaosKind.RATE_LIMIT:
        return _error(rule.effective_status, {"error": RATE_LIMIT_MESSAGE}, headers)
    if rule.kind == ChaosKind.HTML:
        status = rule.effective_status
        return web.Response(
            status=status,
            text=HTML_PAGE.format(status=status),
            content_type="text/html",
            headers=headers,
        )
    if rule.kind == ChaosKind.DROP_BEFORE:
        return _drop(request)
    if rule.kind == ChaosKind.SLOW:
        await asyncio.sleep(rule.delay)
    return None


async def _after(
    request: web.Request, rule: ChaosRule, response: web.StreamResponse
) -> web.StreamResponse:
    if rule.kind == ChaosKind.DROP_AFTER:
        return _drop(request)
    if not isinstance(response, web.Response) or not isinstance(response.body, bytes):
        return response
    body = response.body
    if rule.kind == ChaosKind.TRUNCATED_JSON:
        return web.Response(
            status=response.status,
            body=body[: max(1, len(body) // 2)],
            content_type=response.content_type,
        )
    # slow body: headers now, the body in five slices spread over ``delay`` seconds
    stream = web.StreamResponse(status=response.status)
    stream.content_type = response.content_type
    stream.content_length = len(body)
    await stream.prepare(request)
    step = max(1, len(body) // 5 + 1)
    for start in range(0, len(body), step):
        await asyncio.sleep(rule.delay / 5)
        await stream.write(body[start : start + step])
    await stream.write_eof()
    return stream


@web.middleware
async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Counting, chaos, error bodies: the one way every request goes through."""
    rt = _rt(request)
    if not rt.public_base:
        rt.public_base = str(request.url.origin())
    internal = request.path.startswith("/_sandbox/")
    rule = None
    if not internal:
        rt.stats.requests[f"{request.method} {_route(request)}"] += 1
        rule = rt.chaos.pick(request.method, request.path, _route(request))
    if rule is not None:
        rt.stats.chaos_fired[rule.kind] += 1
        if rule.kind not in ChaosKind.AFTER:
            early = await _before(request, rule)
            if early is not None:
                return early
    try:
        response = await handler(request)
    except SandboxError as exc:
        response = _error(exc.status, exc.body())
    except web.HTTPNotFound:
        response = _error(
            404,
            {
                "error": f"no endpoint {request.method} {request.path}",
                "key": "api_error_not_found",
            },
        )
    except web.HTTPMethodNotAllowed as exc:
        response = _error(
            405,
            {
                "error": f"{request.method} is not allowed on {request.path}; "
                f"use {', '.join(sorted(exc.allowed_methods))}",
                "key": "api_error_method_not_allowed",
            },
        )
    if rule is not None and rule.kind in ChaosKind.AFTER:
        return await _after(request, rule, response)
    return response


# ------------------------------------------------------------------------ uploads


@attrs.define
class _Upload:
    """The parts of one multipart request: text fields by name and stored files in order."""

    fields: dict[str, list[str]] = attrs.Factory(dict)
    files: list[tuple[str, StoredFile]] = attrs.Factory(list)

    def field(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else None


async def _receive_file(rt: Runtime, part: BodyPartReader) -> StoredFile:
    """Stream one file part to disk, checking its size cap and its magic bytes."""
    store = rt.store
    name = part.filename or "upload"
    limit = rt.config.max_upload_bytes
    file_id = store.new_id()
    size = 0
    head = b""
    try:
        with store.open_spool(file_id) as sink:
            while chunk := await part.read_chunk(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise SandboxError(
                        413,
                        "api_error_file_too_large",
                        f"file {name!r} is larger than the upload limit of {limit} bytes "
                        f"({limit / 1024 / 1024:g} MB); send a smaller image",
                    )
                if len(head) < 16:
                    head += chunk[: 16 - len(head)]
                sink.write(chunk)
        if size == 0:
            raise SandboxError(400, "api_error_empty_file", f"file {name!r} is empty")
        fmt = _images.detect_format(head)
        if fmt is None:
            raise SandboxError(
                400,
                "api_error_invalid_file_format",
                f"file {name!r} is not a JPG, PNG or WEBP image; convert it to one of those",
            )
        try:
            width, height = await rt.in_thread(_images.image_size, store.spool_path(file_id))
        except (OSError, ValueError, SyntaxError):
            raise SandboxError(
                400,
                "api_error_invalid_file_format",
                f"file {name!r} looks like {fmt.upper()} but cannot be decoded",
            ) from None
    except BaseException:
        store.discard_spool(file_id)
        raise
    return store.keep(file_id, fmt, width, height, name)


def _discard(rt: Runtime, files: list[tuple[str, StoredFile]]) -> None:
    store = rt.store
    for _, stored in files:
        store.files.pop(stored.id, None)
        store.path(stored).unlink(missing_ok=True)


async def _read_multipart(request: web.Request, file_fields: frozenset[str]) -> _Upload:
    rt = _rt(request)
    if not request.content_type.startswith("multipart/"):
        raise SandboxError(
            400,
            "api_error_invalid_content_type",
            f"send multipart/form-data, not {request.content_type or 'no content type'}",
        )
    upload = _Upload()
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise SandboxError(
                    400, "api_error_invalid_body", "nested multipart is not accepted"
                )
            name = part.name or ""
            if part.filename is not None:
                if name not in file_fields:
                    raise SandboxError(
                        400,
                        "api_error_invalid_field",
                        f"unexpected file field {name!r}; send files as "
                        f"{' or '.join(sorted(file_fields))}",
                    )
                upload.files.append((name, await _receive_file(rt, part)))
            else:
                raw = await part.read(decode=True)
                if len(raw) > MAX_FIELD_BYTES:
                    raise SandboxError(
                        400, "api_error_invalid_field", f"field {name!r} is too long"
                    )
                upload.fields.setdefault(name, []).append(raw.decode("utf-8", "replace"))
    except BaseException:
        _discard(rt, upload.files)
        raise
    return upload


@contextlib.contextmanager
def _discard_on_error(rt: Runtime, upload: _Upload) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _discard(rt, upload.files)
        raise


# ----------------------------------------------------------------------- V3 handlers


async def create_project(request: web.Request) -> web.Response:
    key = _key(request)
    project = _rt(request).state.create_project(key, await _json_body(request))
    return _ok(request, project_json(_rt(request).state, project, _urls(request)), 201)


async def get_project(request: web.Request) -> web.Response:
    key = _key(request)
    state = _rt(request).state
    project = state.get_project(key, request.match_info["id"])
    return _ok(request, project_json(state, project, _urls(request, sized=True)))


async def list_projects(request: web.Request) -> web.Response:
    key = _key(request)
    state = _rt(request).state
    urls = _urls(request, sized=True)
    items, pagination = state.list_projects(key, parse_listing(request.query))
    return _ok(
        request,
        {"data": [project_json(state, p, urls) for p in items], "pagination": pagination},
    )


async def list_project_orders(request: web.Request) -> web.Response:
    key = _key(request)
    state = _rt(request).state
    urls = _urls(request, sized=True)
    listing = parse_listing({k: v for k, v in request.query.items() if k != "s"})
    items, pagination = state.list_orders(key, request.match_info["id"], listing)
    return _ok(request, {"data": [order_json(o, urls) for o in items], "pagination": pagination})


async def create_order(request: web.Request) -> web.Response:
    key = _key(request)
    rt = _rt(request)
    upload = await _read_multipart(request, frozenset({"asset_file"}))
    with _discard_on_error(rt, upload):
        if not upload.files:
            raise SandboxError(
                400, "api_error_missing_field", "asset_file is required: send at least one image"
            )
        roles = resolve_roles(
            len(upload.files),
            upload.fields.get("asset_role", []),
            upload.fields.get("asset_roles", []),
        )
        order = rt.state.create_order(
            key, upload.field("project_id") or None, [f for _, f in upload.files], roles
        )
    urls = _urls(request)
    return _ok(
        request,
        {
            "order_id": order.id,
            "assets": [asset_json(a, urls, thumbnail=False) for a in order.assets],
        },
        201,
    )


async def append_order(request: web.Request) -> web.Response:
    key = _key(request)
    rt = _rt(request)
    order_id = request.match_info["id"]
    rt.state.get_order(key, order_id)  # 404 before reading a large body
    upload = await _read_multipart(request, frozenset({"asset_file"}))
    with _discard_on_error(rt, upload):
        if len(upload.files) != 1:
            raise SandboxError(
                400,
                "api_error_missing_field" if not upload.files else "api_error_too_many_files",
                "append takes exactly one asset_file (the mask image)",
            )
        order, role, asset_type = rt.state.check_append(
            key,
            order_id,
            upload.field("project_id"),
            upload.field("asset_role") or upload.field("asset_roles"),
            upload.field("asset_type"),
        )
        asset = rt.state.append_asset(order, role, asset_type, upload.files[0][1])
    return _ok(
        request,
        {"order_id": order.id, "assets": [asset_json(asset, _urls(request), thumbnail=False)]},
        201,
    )


async def get_order(request: web.Request) -> web.Response:
    key = _key(request)
    order = _rt(request).state.get_order(key, request.match_info["id"])
    return _ok(request, order_json(order, _urls(request, sized=True)))


async def create_process(request: web.Request) -> web.Response:
    key = _key(request)
    rt = _rt(request)
    body = await _json_body(request)
    created = rt.state.create_process(key, body, time.monotonic())
    payload: dict[str, Any] = {"process_ids": [p.id for p in created]}
    group = created[0].process_group_id
    if group and created[0].tool_def.creates_group:
        payload["process_group_id"] = group
    for process in created:
        rt.launch(process)
    return _ok(request, payload, 201)


async def get_process(request: web.Request) -> web.Response:
    key = _key(request)
    process = _rt(request).state.poll_process(key, request.match_info["id"], time.monotonic())
    return _ok(request, process_json(process, _urls(request, sized=True)))


# ------------------------------------------------------------------ catalogue, V1


async def list_tools(request: web.Request) -> web.Response:
    tools = _rt(request).state.catalogue.tools
    return _ok(request, {"data": [t.wire() for t in tools]})


async def tool_widgets(request: web.Request) -> web.Response:
    key = _key(request)
    state = _rt(request).state
    slug = request.match_info["slug"]
    if state.catalogue.resolve(slug) is None:
        raise SandboxError(404, "api_error_tool_not_found", f"tool {slug!r} does not exist")
    tool = state.resolve_tool(key, slug)
    base = str(request.url.origin())
    return _ok(request, {"data": [w.wire(base) for w in tool.widgets], "message": ""})


async def v1_upload(request: web.Request) -> web.Response:
    key = _key(request)
    rt = _rt(request)
    upload = await _read_multipart(request, frozenset({"image"}))
    with _discard_on_error(rt, upload):
        service = upload.field("service_name")
        rt.state.v1_tool(key, service)
        if len(upload.files) != 1:
            raise SandboxError(400, "api_error_missing_field", "send exactly one image file")
        order = rt.state.create_order(key, None, [upload.files[0][1]], ["primary_angle"])
        order.v1_service = service
    return _ok(request, {"order_id": order.id}, 201)


async def v1_submit(request: web.Request) -> web.Response:
    key = _key(request)
    rt = _rt(request)
    created = rt.state.v1_submit(key, await _json_body(request), time.monotonic())
    for process in created:
        rt.launch(process)
    return _ok(request, {"order_id": created[0].order_id, "status": "pending"}, 201)


# -------------------------------------------------------------------- files, icons


async def get_file(request: web.Request) -> web.StreamResponse:
    rt = _rt(request)
    store = rt.store
    stored = store.files.get(request.match_info["file_id"])
    variant = request.match_info["variant"]
    if stored is None or variant not in {
        f"original.{EXTENSIONS[stored.format]}",
        f"thumbnail.{EXTENSIONS[stored.format]}",
    }:
        raise SandboxError(404, "api_error_file_not_found", "no such file")
    width, height = parse_size(request.query)
    if variant.startswith("thumbnail"):
        scale = min(1.0, _images.THUMBNAIL_SIZE / max(stored.width, stored.height))
        width, height = max(1, round(stored.width * scale)), max(1, round(stored.height * scale))
    path = store.path(stored)
    if width or height:
        target = store.variant_path(stored, f"{width or 0}x{height or 0}")
        if not target.exists():
            partial = target.with_name(f"{target.name}.{store.new_id()}.tmp")
            await rt.in_thread(_images.resize_to, path, partial, width, height)
            partial.replace(target)
        path = target
    return web.FileResponse(path, headers={"Content-Type": f"image/{stored.format}"})


async def get_icon(request: web.Request) -> web.StreamResponse:
    rt = _rt(request)
    slug = request.match_info["slug"]
    known = {i.slug for t in rt.state.catalogue.tools for w in t.widgets for i in w.items}
    if slug not in known:
        raise SandboxError(404, "api_error_file_not_found", f"no icon for {slug!r}")
    path = rt.store.root / f"icon-{slug}.png"
    if not path.exists():
        partial = path.with_name(f"{path.name}.{rt.store.new_id()}.tmp")
        await rt.in_thread(_images.make_icon, slug, partial)
        partial.replace(path)
    return web.FileResponse(path, headers={"Content-Type": "image/png"})


# ------------------------------------------------------------- sandbox-only control


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
    return web.json_response(_rt(request).stats.wire())


async def sandbox_get_config(request: web.Request) -> web.Response:
    return web.json_response(_config_json(_rt(request)))


async def sandbox_patch_config(request: web.Request) -> web.Response:
    rt = _rt(request)
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise _control_error("send a JSON object of settings to change")
    try:
        rt.config.update(body)
    except (ValueError, TypeError) as exc:
        raise _control_error(str(exc)) from None
    return web.json_response(_config_json(rt))


async def sandbox_add_chaos(request: web.Request) -> web.Response:
    rt = _rt(request)
    body = await _json_body(request)
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
    return web.json_response({"rules": [r.wire() for r in _rt(request).chaos.rules]})


async def sandbox_clear_chaos(request: web.Request) -> web.Response:
    rt = _rt(request)
    count = len(rt.chaos.rules)
    rt.chaos.clear()
    return web.json_response({"cleared": count})


async def sandbox_add_webhook(request: web.Request) -> web.Response:
    rt = _rt(request)
    body = await _json_body(request)
    url = body.get("url") if isinstance(body, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise _control_error('send {"url": "https://..."} (http is accepted by the sandbox)')
    if url not in rt.registered_webhooks:
        rt.registered_webhooks.append(url)
    return web.json_response({"webhook_urls": rt.webhook_urls}, status=201)


async def sandbox_wait_idle(request: web.Request) -> web.Response:
    rt = _rt(request)
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
    _rt(request).advance()
    return web.json_response({"advanced": True})


async def sandbox_health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "base_url": str(request.url.origin())})


# -------------------------------------------------------------------------- factory


def build_app(runtime: Runtime) -> web.Application:
    """The application; its ``cleanup_ctx`` starts and stops ``runtime`` with it."""
    app = web.Application(middlewares=[edge])
    app[RUNTIME] = runtime

    async def lifecycle(_: web.Application) -> AsyncIterator[None]:
        await runtime.start()
        yield
        await runtime.stop()

    app.cleanup_ctx.append(lifecycle)
    r = app.router
    r.add_post("/v3/project", create_project)
    r.add_get("/v3/project", list_projects)
    r.add_get("/v3/project/{id}", get_project)
    r.add_get("/v3/project/{id}/order", list_project_orders)
    r.add_post("/v3/order", create_order)
    r.add_post("/v3/order/{id}/append", append_order)
    r.add_get("/v3/order/{id}", get_order)
    r.add_post("/v3/process", create_process)
    r.add_get("/v3/process/{id}", get_process)
    r.add_get("/api/tools", list_tools)
    r.add_get("/v1/cathub/tools/{slug}/widgets", tool_widgets)
    r.add_post("/v1/order/image", v1_upload)
    r.add_post("/v1/order", v1_submit)
    r.add_get("/v1/order/{id}", get_order)
    r.add_get("/files/{file_id}/{variant}", get_file)
    r.add_get("/icons/{slug}.png", get_icon)
    r.add_get("/_sandbox/health", sandbox_health)
    r.add_get("/_sandbox/stats", sandbox_stats)
    r.add_get("/_sandbox/config", sandbox_get_config)
    r.add_patch("/_sandbox/config", sandbox_patch_config)
    r.add_get("/_sandbox/chaos", sandbox_list_chaos)
    r.add_post("/_sandbox/chaos", sandbox_add_chaos)
    r.add_delete("/_sandbox/chaos", sandbox_clear_chaos)
    r.add_post("/_sandbox/webhooks", sandbox_add_webhook)
    r.add_post("/_sandbox/wait-idle", sandbox_wait_idle)
    r.add_post("/_sandbox/advance", sandbox_advance)
    return app
