"""The service's routes in the sandbox: V3 projects, orders and processes, the catalogue, V1,
result files and icons (spec section 4).

Handlers parse the request, call the state (``_state.py``, ``_process_rules.py``) and write wire
JSON (``_wire.py``).
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from asyncsdk import MaskError
from asyncsdk.sandbox import _images
from asyncsdk.sandbox._files import EXTENSIONS
from asyncsdk.sandbox._http import api_key, file_urls, json_body, runtime_of, success
from asyncsdk.sandbox._multipart import discard_on_error, read_multipart
from asyncsdk.sandbox._process_rules import create_process as create_processes
from asyncsdk.sandbox._process_rules import resolve_tool, v1_tool
from asyncsdk.sandbox._process_rules import v1_submit as submit_v1
from asyncsdk.sandbox._records import SandboxError, parse_listing, parse_size, resolve_roles
from asyncsdk.sandbox._wire import asset_json, order_json, process_json, project_json

__all__ = ["add_routes"]


async def create_project(request: web.Request) -> web.Response:
    key = api_key(request)
    project = runtime_of(request).state.create_project(key, await json_body(request))
    return success(
        request, project_json(runtime_of(request).state, project, file_urls(request)), 201
    )


async def get_project(request: web.Request) -> web.Response:
    key = api_key(request)
    state = runtime_of(request).state
    project = state.get_project(key, request.match_info["id"])
    return success(request, project_json(state, project, file_urls(request, sized=True)))


async def list_projects(request: web.Request) -> web.Response:
    key = api_key(request)
    state = runtime_of(request).state
    urls = file_urls(request, sized=True)
    items, pagination = state.list_projects(key, parse_listing(request.query))
    return success(
        request,
        {"data": [project_json(state, p, urls) for p in items], "pagination": pagination},
    )


async def list_project_orders(request: web.Request) -> web.Response:
    key = api_key(request)
    state = runtime_of(request).state
    urls = file_urls(request, sized=True)
    listing = parse_listing({k: v for k, v in request.query.items() if k != "s"})
    items, pagination = state.list_orders(key, request.match_info["id"], listing)
    return success(
        request, {"data": [order_json(o, urls) for o in items], "pagination": pagination}
    )


async def create_order(request: web.Request) -> web.Response:
    key = api_key(request)
    rt = runtime_of(request)
    upload = await read_multipart(request, frozenset({"asset_file"}))
    with discard_on_error(rt, upload):
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
    urls = file_urls(request)
    return success(
        request,
        {
            "order_id": order.id,
            "assets": [asset_json(a, urls, thumbnail=False) for a in order.assets],
        },
        201,
    )


async def append_order(request: web.Request) -> web.Response:
    key = api_key(request)
    rt = runtime_of(request)
    order_id = request.match_info["id"]
    rt.state.get_order(key, order_id)  # 404 before reading a large body
    upload = await read_multipart(request, frozenset({"asset_file"}))
    with discard_on_error(rt, upload):
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
    return success(
        request,
        {"order_id": order.id, "assets": [asset_json(asset, file_urls(request), thumbnail=False)]},
        201,
    )


async def get_order(request: web.Request) -> web.Response:
    key = api_key(request)
    order = runtime_of(request).state.get_order(key, request.match_info["id"])
    return success(request, order_json(order, file_urls(request, sized=True)))


async def create_process(request: web.Request) -> web.Response:
    key = api_key(request)
    rt = runtime_of(request)
    body = await json_body(request)
    created = create_processes(rt.state, key, body, time.monotonic())
    payload: dict[str, Any] = {"process_ids": [p.id for p in created]}
    group = created[0].process_group_id
    if group and created[0].tool_def.creates_group:
        payload["process_group_id"] = group
    for process in created:
        rt.launch(process)
    return success(request, payload, 201)


async def get_process(request: web.Request) -> web.Response:
    key = api_key(request)
    process = runtime_of(request).state.poll_process(
        key, request.match_info["id"], time.monotonic()
    )
    return success(request, process_json(process, file_urls(request, sized=True)))


# ------------------------------------------------------------------ catalogue, V1


async def list_tools(request: web.Request) -> web.Response:
    tools = runtime_of(request).state.catalogue.tools
    return success(request, {"data": [t.wire() for t in tools]})


async def tool_widgets(request: web.Request) -> web.Response:
    key = api_key(request)
    state = runtime_of(request).state
    # An unknown slug is an invalid value (400), as on POST /v3/process: the spec keeps 404 for
    # the ids of orders, processes, projects and assets.
    tool = resolve_tool(state, key, request.match_info["slug"])
    base = str(request.url.origin())
    return success(request, {"data": [w.wire(base) for w in tool.widgets], "message": ""})


async def v1_upload(request: web.Request) -> web.Response:
    key = api_key(request)
    rt = runtime_of(request)
    upload = await read_multipart(request, frozenset({"image"}))
    with discard_on_error(rt, upload):
        service = upload.field("service_name")
        v1_tool(rt.state, key, service)
        if len(upload.files) != 1:
            raise SandboxError(400, "api_error_missing_field", "send exactly one image file")
        order = rt.state.create_order(key, None, [upload.files[0][1]], ["primary_angle"])
        order.v1_service = service
    return success(request, {"order_id": order.id}, 201)


async def v1_submit(request: web.Request) -> web.Response:
    key = api_key(request)
    rt = runtime_of(request)
    created = submit_v1(rt.state, key, await json_body(request), time.monotonic())
    for process in created:
        rt.launch(process)
    return success(request, {"order_id": created[0].order_id, "status": "pending"}, 201)


# -------------------------------------------------------------------- files, icons


async def get_file(request: web.Request) -> web.StreamResponse:
    rt = runtime_of(request)
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
            try:
                await rt.in_thread(_images.resize_to, path, partial, width, height)
            except MaskError as exc:
                raise SandboxError(400, "api_error_image_too_large", str(exc)) from None
            partial.replace(target)
        path = target
    return web.FileResponse(path, headers={"Content-Type": f"image/{stored.format}"})


async def get_icon(request: web.Request) -> web.StreamResponse:
    rt = runtime_of(request)
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


def add_routes(router: web.UrlDispatcher) -> None:
    """The endpoints of the service: V3, the catalogue, V1, files and icons."""
    router.add_post("/v3/project", create_project)
    router.add_get("/v3/project", list_projects)
    router.add_get("/v3/project/{id}", get_project)
    router.add_get("/v3/project/{id}/order", list_project_orders)
    router.add_post("/v3/order", create_order)
    router.add_post("/v3/order/{id}/append", append_order)
    router.add_get("/v3/order/{id}", get_order)
    router.add_post("/v3/process", create_process)
    router.add_get("/v3/process/{id}", get_process)
    router.add_get("/api/tools", list_tools)
    router.add_get("/v1/cathub/tools/{slug}/widgets", tool_widgets)
    router.add_post("/v1/order/image", v1_upload)
    router.add_post("/v1/order", v1_submit)
    router.add_get("/v1/order/{id}", get_order)
    router.add_get("/files/{file_id}/{variant}", get_file)
    router.add_get("/icons/{slug}.png", get_icon)
