"""The sandbox's in-memory model of the service and every rule it enforces.

Plain methods on plain records; no aiohttp, no disk, no clock other than the timestamps written into
records.  A broken rule raises :class:`SandboxError` carrying the HTTP status, the ``api_error_...``
key and a message that names the fix; the HTTP layer turns it into ``{"error": ..., "key": ...}``.

Decisions where the spec is silent (also in ``docs/sandbox.md``):

- ``limit`` above 30 (or below 1), a ``page`` below 1 or not an integer: 400, never clamped.
- An ``asset_map`` id that exists nowhere: 404; one that belongs to another order: 422.
- The ``-input-mask`` slot must name a ``mask`` asset and the image slots a non-mask asset: 422.
- A required widget (``isOptional`` false) left out: 422 ``api_error_widget_required``.
- An item whose ``accessibleIn`` names none of the items selected in the other widgets: 422.
- Several items in a single-select widget: 422; the same widget twice: 422; no items: 422.
- An unknown tool slug: 400 (an invalid value of an enumerated field); a known tool outside the
  key's plan: 403.  ``process_group_id`` that no earlier process created: 404.
- The order is ``active`` while any of its processes is ``pending`` or ``processing``.
- An order without a ``project_id`` goes to the key's default project (``default: true``).
"""

from __future__ import annotations

import json
import math
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from asyncsdk.sandbox._catalogue import CATALOGUE, Catalogue, ToolDef, WidgetDef
from asyncsdk.sandbox._config import SandboxConfig
from asyncsdk.sandbox._stats import Stats

__all__ = [
    "AssetRecord",
    "Listing",
    "OrderRecord",
    "ProcessRecord",
    "ProjectRecord",
    "SandboxError",
    "SandboxState",
    "StoredFile",
    "parse_listing",
    "parse_size",
    "resolve_roles",
]

ROLES: Final = frozenset({"primary_angle", "secondary_angle", "mask"})
MAX_PAGE_SIZE: Final = 30
DEFAULT_PAGE_SIZE: Final = 10
SORTS: Final = ("asc", "desc", "modified")
RATE_LIMIT_MESSAGE: Final = "rate-limit exceeded, try again later"


class SandboxError(Exception):
    """A request broke a rule: answered with ``status`` and ``{"error": message, "key": key}``."""

    def __init__(self, status: int, key: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.key = key
        self.message = message

    def body(self) -> dict[str, str]:
        return {"error": self.message, "key": self.key}


class RateLimited(SandboxError):
    """The generation rate limit: 429 whose body has no ``key`` (decisions.md)."""

    def __init__(self) -> None:
        super().__init__(429, "", RATE_LIMIT_MESSAGE)

    def body(self) -> dict[str, str]:
        return {"error": self.message}


def _bad(key: str, message: str) -> SandboxError:
    return SandboxError(400, f"api_error_{key}", message)


def _unprocessable(key: str, message: str) -> SandboxError:
    return SandboxError(422, f"api_error_{key}", message)


def _not_found(what: str, ident: str) -> SandboxError:
    return SandboxError(404, f"api_error_{what}_not_found", f"{what} {ident!r} does not exist")


def _now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@attrs.define(kw_only=True)
class StoredFile:
    """An image on disk, known by id; ``path`` is relative to the sandbox's file folder."""

    id: str
    name: str
    format: str
    width: int
    height: int


@attrs.define(kw_only=True)
class AssetRecord:
    id: str
    order_id: str
    role: str
    asset_type: str
    file: StoredFile


@attrs.define(kw_only=True)
class ProjectRecord:
    id: str
    api_key: str
    address: str
    default: bool
    created_seq: int
    modified_seq: int
    updated_at: datetime
    order_ids: list[str] = attrs.Factory(list)


@attrs.define(kw_only=True)
class ProcessRecord:
    id: str
    order_id: str
    api_key: str
    tool: str
    tool_def: ToolDef
    asset_map: dict[str, str]
    selections: dict[str, tuple[str, ...]]
    process_group_id: str | None
    will_fail: bool
    status: str = "pending"
    result: AssetRecord | None = None
    created_at: datetime = attrs.Factory(_now)

    @property
    def finished(self) -> bool:
        return self.status in {"done", "failed"}

    @property
    def item_slugs(self) -> list[str]:
        return [s for items in self.selections.values() for s in items]


@attrs.define(kw_only=True)
class OrderRecord:
    id: str
    project_id: str
    api_key: str
    assets: list[AssetRecord]
    created_at: datetime
    updated_at: datetime
    created_seq: int
    modified_seq: int
    processes: list[ProcessRecord] = attrs.Factory(list)
    v1_service: str | None = None

    @property
    def status(self) -> str:
        if any(p.status in {"pending", "processing"} for p in self.processes):
            return "active"
        return "idle"


@attrs.frozen
class Listing:
    """The parsed query of a listing endpoint (spec 4.3)."""

    page: int = 1
    limit: int = DEFAULT_PAGE_SIZE
    sort: str = "desc"
    search: str | None = None

    def window(self, total: int) -> tuple[slice, dict[str, Any]]:
        """The slice of the sorted items to show, and the ``pagination`` object."""
        pages = math.ceil(total / self.limit)
        start = (self.page - 1) * self.limit
        previous = f"?page={self.page - 1}&limit={self.limit}" if self.page > 1 else ""
        following = f"?page={self.page + 1}&limit={self.limit}" if self.page < pages else ""
        return slice(start, start + self.limit), {
            "page": self.page,
            "limit": self.limit,
            "total_count": total,
            "total_pages": pages,
            "previous_page": previous,
            "next_page": following,
        }


def _int_param(query: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise _bad(f"invalid_{name}", f"{name} must be an integer, got {raw!r}") from None


def parse_listing(query: Mapping[str, str]) -> Listing:
    """Validate ``page``, ``limit``, ``sort`` and ``s``; every bad value is a 400 naming the fix."""
    page = _int_param(query, "page", 1)
    limit = _int_param(query, "limit", DEFAULT_PAGE_SIZE)
    assert page is not None
    assert limit is not None
    if page < 1:
        raise _bad("invalid_page", f"page must be 1 or more, got {page}")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise _bad("invalid_limit", f"limit must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    sort = query.get("sort") or "desc"
    if sort not in SORTS:
        raise _bad("invalid_sort", f"sort must be one of {', '.join(SORTS)}; got {sort!r}")
    search = query.get("s") or None
    return Listing(page=page, limit=limit, sort=sort, search=search)


def parse_size(query: Mapping[str, str]) -> tuple[int | None, int | None]:
    """``width``/``height`` query parameters: positive integers up to 10000, or absent."""
    out: list[int | None] = []
    for name in ("width", "height"):
        value = _int_param(query, name, None)
        if value is not None and not 1 <= value <= 10_000:
            raise _bad(f"invalid_{name}", f"{name} must be between 1 and 10000, got {value}")
        out.append(value)
    return out[0], out[1]


def _split_roles(values: Sequence[str]) -> list[str]:
    """Roles as sent: repeated fields, or one field holding a JSON list or comma-separated roles."""
    if len(values) == 1:
        raw = values[0].strip()
        if raw.startswith("["):
            try:
                parsed = json.loads(raw)
            except ValueError:
                raise _bad(
                    "invalid_asset_role", f"asset_roles is not a JSON list: {raw!r}"
                ) from None
            if not isinstance(parsed, list) or not all(isinstance(r, str) for r in parsed):
                raise _bad("invalid_asset_role", "asset_roles must be a list of role strings")
            return [r.strip() for r in parsed]
        if "," in raw:
            return [r.strip() for r in raw.split(",")]
    return [v.strip() for v in values]


def resolve_roles(n_files: int, asset_role: Sequence[str], asset_roles: Sequence[str]) -> list[str]:
    """One role per file, positionally aligned; missing trailing roles default to primary_angle."""
    if asset_role and asset_roles:
        raise _bad(
            "invalid_asset_role",
            "send the roles under asset_role (repeated) or asset_roles, not both",
        )
    roles = _split_roles(asset_role or asset_roles)
    if len(roles) > n_files:
        raise _bad(
            "invalid_asset_role",
            f"{len(roles)} asset roles were sent for {n_files} file(s); send one role per file",
        )
    for role in roles:
        if role not in ROLES:
            raise _bad(
                "invalid_asset_role",
                f"asset role {role!r} is not one of {', '.join(sorted(ROLES))}",
            )
    return roles + ["primary_angle"] * (n_files - len(roles))


def _check_role_counts(roles: Iterable[str]) -> None:
    roles = list(roles)
    for role in ("primary_angle", "secondary_angle"):
        if roles.count(role) > 1:
            raise _bad(
                "duplicate_asset_role",
                f"an order holds at most one {role} asset; {roles.count(role)} were sent",
            )


@attrs.define
class SandboxState:
    """Every project, order, asset and process, and the rules of creating them."""

    config: SandboxConfig
    stats: Stats
    catalogue: Catalogue = CATALOGUE
    projects: dict[str, ProjectRecord] = attrs.Factory(dict)
    orders: dict[str, OrderRecord] = attrs.Factory(dict)
    assets: dict[str, AssetRecord] = attrs.Factory(dict)
    processes: dict[str, ProcessRecord] = attrs.Factory(dict)
    groups: set[str] = attrs.Factory(set)
    generations: dict[str, deque[float]] = attrs.Factory(dict)
    polls: dict[str, float] = attrs.Factory(dict)
    _seq: int = 0
    _ids: random.Random = attrs.field(init=False)
    _failures: random.Random = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._ids = random.Random(f"ids-{self.config.seed}")  # noqa: S311 - reproducible test ids
        self._failures = random.Random(f"failures-{self.config.seed}")  # noqa: S311 - seeded on purpose

    # ----------------------------------------------------------------- helpers

    def new_id(self) -> str:
        return f"{self._ids.getrandbits(96):024x}"

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # ------------------------------------------------------------------ access

    def authenticate(self, key: str | None) -> str:
        """The key itself when valid; 401 when missing or unknown (the key is never echoed)."""
        if not key:
            raise SandboxError(
                401, "api_error_unauthorized", "missing x-api-key header; send your API key in it"
            )
        if key not in self.config.api_keys:
            raise SandboxError(
                401,
                "api_error_unauthorized",
                "invalid API key; check the x-api-key header (regenerated keys replace old ones)",
            )
        return key

    def resolve_tool(self, key: str, slug: object) -> ToolDef:
        """The tool named by ``slug`` (aliases accepted); 400 when unknown, 403 outside the plan."""
        if not isinstance(slug, str) or not slug:
            raise _bad(
                "missing_field", "tool is required: send a tool slug such as tool-day-to-dusk"
            )
        tool = self.catalogue.resolve(slug)
        if tool is None:
            known = ", ".join(t.slug for t in self.catalogue.tools)
            raise _bad("invalid_tool", f"unknown tool {slug!r}; known tools: {known}")
        allowed = self.config.api_keys.get(key)
        if allowed is not None and not ({tool.slug, *tool.aliases} & allowed):
            raise SandboxError(
                403,
                "api_error_forbidden",
                f"your plan does not include {slug}; upgrade the plan to use this tool",
            )
        return tool

    # ---------------------------------------------------------------- projects

    def create_project(self, key: str, body: object) -> ProjectRecord:
        if not isinstance(body, Mapping):
            raise _bad("invalid_body", 'the body must be a JSON object such as {"address": ...}')
        address = body.get("address")
        if address is None or (isinstance(address, str) and not address.strip()):
            raise _bad("missing_field", "address is required: the property address or name")
        if not isinstance(address, str):
            raise _bad("invalid_field", "address must be a string")
        return self._add_project(key, address.strip(), default=False)

    def _add_project(self, key: str, address: str, *, default: bool) -> ProjectRecord:
        seq = self._next_seq()
        project = ProjectRecord(
            id=self.new_id(),
            api_key=key,
            address=address,
            default=default,
            created_seq=seq,
            modified_seq=seq,
            updated_at=_now(),
        )
        self.projects[project.id] = project
        self.stats.projects_created += 1
        return project

    def default_project(self, key: str) -> ProjectRecord:
        for project in self.projects.values():
            if project.default and project.api_key == key:
                return project
        return self._add_project(key, "Default project", default=True)

    def get_project(self, key: str, project_id: str) -> ProjectRecord:
        project = self.projects.get(project_id)
        if project is None or project.api_key != key:
            raise _not_found("project", project_id)
        return project

    def touch_project(self, project_id: str) -> None:
        project = self.projects[project_id]
        project.modified_seq = self._next_seq()
        project.updated_at = _now()

    def list_projects(
        self, key: str, listing: Listing
    ) -> tuple[list[ProjectRecord], dict[str, Any]]:
        items = [p for p in self.projects.values() if p.api_key == key]
        if listing.search:
            needle = listing.search.casefold()
            items = [p for p in items if needle in p.address.casefold()]
        items = _sorted(items, listing.sort)
        window, pagination = listing.window(len(items))
        return items[window], pagination

    def project_orders(self, project: ProjectRecord) -> list[OrderRecord]:
        return [self.orders[o] for o in project.order_ids]

    def list_orders(
        self, key: str, project_id: str, listing: Listing
    ) -> tuple[list[OrderRecord], dict[str, Any]]:
        project = self.get_project(key, project_id)
        items = _sorted(self.project_orders(project), listing.sort)
        window, pagination = listing.window(len(items))
        return items[window], pagination

    # ------------------------------------------------------------------ orders

    def create_order(
        self,
        key: str,
        project_id: str | None,
        files: Sequence[StoredFile],
        roles: Sequence[str],
    ) -> OrderRecord:
        """A new order of ``files`` with their ``roles`` (already resolved by position)."""
        if not files:
            raise _bad("missing_field", "asset_file is required: send at least one image file")
        if len(files) > self.config.max_files_per_order:
            raise _bad(
                "too_many_files",
                f"{len(files)} files were sent; an order takes at most "
                f"{self.config.max_files_per_order}",
            )
        project = self.get_project(key, project_id) if project_id else self.default_project(key)
        _check_role_counts(roles)
        if "primary_angle" not in roles:
            raise _bad(
                "missing_primary_angle",
                "an order needs one primary_angle asset (the main photo); mark one file so",
            )
        now = _now()
        seq = self._next_seq()
        order = OrderRecord(
            id=self.new_id(),
            project_id=project.id,
            api_key=key,
            assets=[],
            created_at=now,
            updated_at=now,
            created_seq=seq,
            modified_seq=seq,
        )
        for file, role in zip(files, roles, strict=True):
            order.assets.append(self._add_asset(order.id, role, "image", file))
        self.orders[order.id] = order
        project.order_ids.append(order.id)
        self.touch_project(project.id)
        self.stats.orders_created += 1
        return order

    def _add_asset(
        self, order_id: str, role: str, asset_type: str, file: StoredFile
    ) -> AssetRecord:
        asset = AssetRecord(
            id=self.new_id(), order_id=order_id, role=role, asset_type=asset_type, file=file
        )
        self.assets[asset.id] = asset
        self.stats.assets_uploaded += 1
        return asset

    def get_order(self, key: str, order_id: str) -> OrderRecord:
        order = self.orders.get(order_id)
        if order is None or order.api_key != key:
            raise _not_found("order", order_id)
        return order

    def check_append(
        self,
        key: str,
        order_id: str,
        project_id: str | None,
        role: str | None,
        asset_type: str | None,
    ) -> tuple[OrderRecord, str, str]:
        """Validate an append (spec 4.6) before its file is kept: (order, role, asset_type)."""
        order = self.get_order(key, order_id)
        if project_id and project_id != order.project_id:
            if project_id not in self.projects:
                raise _not_found("project", project_id)
            raise _unprocessable(
                "project_mismatch",
                f"order {order_id!r} belongs to project {order.project_id!r}, not {project_id!r}",
            )
        role = (role or "mask").strip()
        if role not in ROLES:
            raise _bad(
                "invalid_asset_role",
                f"asset role {role!r} is not one of {', '.join(sorted(ROLES))}",
            )
        asset_type = (asset_type or ("mask" if role == "mask" else "image")).strip()
        if asset_type not in {"image", "mask"}:
            raise _bad(
                "invalid_asset_type", f"asset_type must be image or mask, got {asset_type!r}"
            )
        if (asset_type == "mask") != (role == "mask"):
            raise _bad("invalid_asset_type", "asset_type mask goes with asset_role mask")
        _check_role_counts([a.role for a in order.assets] + [role])
        return order, role, asset_type

    def append_asset(
        self, order: OrderRecord, role: str, asset_type: str, file: StoredFile
    ) -> AssetRecord:
        asset = self._add_asset(order.id, role, asset_type, file)
        order.assets.append(asset)
        order.updated_at = _now()
        order.modified_seq = self._next_seq()
        self.touch_project(order.project_id)
        return asset

    # --------------------------------------------------------------- processes

    def get_process(self, key: str, process_id: str) -> ProcessRecord:
        process = self.processes.get(process_id)
        if process is None or process.api_key != key:
            raise _not_found("process", process_id)
        return process

    def poll_process(self, key: str, process_id: str, now: float) -> ProcessRecord:
        """``GET /v3/process/:id``; with ``poll_limit``, 429 for a second GET of the same process
        within ``poll_limit_interval`` seconds of the last one that was answered."""
        process = self.get_process(key, process_id)
        if self.config.poll_limit:
            last = self.polls.get(process_id)
            if last is not None and now - last < self.config.poll_limit_interval:
                raise RateLimited()
            self.polls[process_id] = now
        return process

    def check_rate_limit(self, key: str, now: float) -> None:
        """429 when the key already made ``rate_limit_count`` generations in the window."""
        if not self.config.rate_limit:
            return
        window = self.generations.setdefault(key, deque())
        while window and now - window[0] >= self.config.rate_limit_window:
            window.popleft()
        if len(window) >= self.config.rate_limit_count:
            raise RateLimited()

    def create_process(self, key: str, body: object, now: float) -> list[ProcessRecord]:
        """Validate a process request (spec 4.8) and create its process(es), all ``pending``."""
        if not isinstance(body, Mapping):
            raise _bad(
                "invalid_body", "the body must be a JSON object with order_id, tool, asset_map"
            )
        for name in ("order_id", "tool", "asset_map"):
            if body.get(name) in (None, ""):
                raise _bad("missing_field", f"{name} is required")
        order_id = body["order_id"]
        if not isinstance(order_id, str):
            raise _bad("invalid_field", "order_id must be a string")
        asset_map = body["asset_map"]
        if not isinstance(asset_map, Mapping):
            raise _bad(
                "invalid_field", "asset_map must be an object mapping slot names to asset ids"
            )
        widgets = body.get("widgets")
        if widgets is None:
            widgets = []
        if not isinstance(widgets, list):
            raise _bad("invalid_field", "widgets must be a list of {slug, item_slugs} objects")
        group_id = body.get("process_group_id")
        if group_id is not None and not isinstance(group_id, str):
            raise _bad("invalid_field", "process_group_id must be a string")
        sent_tool = body["tool"]
        tool = self.resolve_tool(key, sent_tool)
        assert isinstance(sent_tool, str)
        self.check_rate_limit(key, now)
        order = self.get_order(key, order_id)
        clean_map = self._check_asset_map(tool, sent_tool, order, asset_map)
        selections = self.check_widgets(tool, widgets)
        if group_id:
            if group_id not in self.groups:
                raise _not_found("process_group", group_id)
        elif tool.creates_group:
            group_id = self.new_id()
            self.groups.add(group_id)
        created = []
        for _ in range(max(1, self.config.processes_per_request)):
            will_fail = sent_tool in self.config.fail_tools or tool.slug in self.config.fail_tools
            draw = self._failures.random()
            process = ProcessRecord(
                id=self.new_id(),
                order_id=order.id,
                api_key=key,
                tool=sent_tool,
                tool_def=tool,
                asset_map=clean_map,
                selections=selections,
                process_group_id=group_id or None,
                will_fail=will_fail or draw < self.config.failure_rate,
            )
            self.processes[process.id] = process
            order.processes.append(process)
            created.append(process)
            self.stats.processes_created += 1
            if self.config.rate_limit:
                self.generations.setdefault(key, deque()).append(now)
        order.updated_at = _now()
        order.modified_seq = self._next_seq()
        self.touch_project(order.project_id)
        return created

    def _check_asset_map(
        self, tool: ToolDef, sent: str, order: OrderRecord, asset_map: Mapping[str, Any]
    ) -> dict[str, str]:
        accepted = {frozenset(tool.slots_for(s)): s for s in (tool.slug, *tool.aliases)}
        keys = frozenset(asset_map)
        if keys not in accepted:
            wanted = ", ".join(tool.slots_for(sent))
            raise _unprocessable(
                "invalid_asset_map",
                f"asset_map keys must be exactly the input slots of {sent}: {wanted}; "
                f"got {', '.join(sorted(keys)) or 'none'}",
            )
        clean: dict[str, str] = {}
        for slot, asset_id in asset_map.items():
            if not isinstance(asset_id, str) or not asset_id:
                raise _bad("invalid_field", f"asset_map[{slot!r}] must be an asset id string")
            asset = self.assets.get(asset_id)
            if asset is None or self.orders[asset.order_id].api_key != order.api_key:
                raise _not_found("asset", asset_id)
            if asset.order_id != order.id:
                raise _unprocessable(
                    "asset_not_in_order",
                    f"asset {asset_id!r} belongs to another order, not to {order.id!r}; "
                    "map only assets of the order named by order_id",
                )
            is_mask_slot = slot.endswith("-input-mask")
            if is_mask_slot and asset.role != "mask":
                raise _unprocessable(
                    "invalid_asset_map",
                    f"slot {slot} takes a mask asset (append it with asset_role=mask); "
                    f"asset {asset_id!r} is a {asset.role}",
                )
            if not is_mask_slot and asset.role == "mask":
                raise _unprocessable(
                    "invalid_asset_map", f"slot {slot} takes a photo; asset {asset_id!r} is a mask"
                )
            clean[slot.replace(sent, tool.slug, 1)] = asset_id
        return clean

    def check_widgets(self, tool: ToolDef, widgets: Sequence[Any]) -> dict[str, tuple[str, ...]]:
        """Selections per widget slug, after every widget rule of spec 2.5 and 4.8."""
        chosen: dict[str, tuple[str, ...]] = {}
        for entry in widgets:
            if not isinstance(entry, Mapping):
                raise _bad("invalid_field", "each widgets entry must be {slug, item_slugs}")
            slug, items = entry.get("slug"), entry.get("item_slugs")
            if not isinstance(slug, str) or not slug:
                raise _bad("missing_field", "each widgets entry needs a slug")
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise _bad("invalid_field", f"item_slugs of {slug} must be a list of item slugs")
            widget = tool.widget(slug)
            if widget is None:
                known = ", ".join(w.slug for w in tool.widgets) or "none"
                raise _unprocessable(
                    "invalid_widget",
                    f"widget {slug!r} is not a widget of {tool.slug}; known: {known}",
                )
            if slug in chosen:
                raise _unprocessable("duplicate_widget", f"widget {slug} is given twice")
            if not items:
                raise _unprocessable(
                    "missing_item", f"widget {slug} needs at least one item slug, or leave it out"
                )
            for item in items:
                if widget.item(item) is None:
                    raise _unprocessable(
                        "invalid_item", f"item {item!r} does not belong to widget {slug}"
                    )
            if len(items) > 1 and not widget.multiple:
                raise _unprocessable(
                    "too_many_items", f"widget {slug} is single-select; send exactly one item slug"
                )
            if len(set(items)) != len(items):
                raise _unprocessable("duplicate_item", f"widget {slug} lists an item twice")
            chosen[slug] = tuple(items)
        for widget in tool.widgets:
            if not widget.is_optional and widget.slug not in chosen:
                raise _unprocessable(
                    "widget_required",
                    f"widget {widget.slug} is required; choose one of its items "
                    f"(e.g. {widget.items[0].slug})",
                )
        selected = {i for items in chosen.values() for i in items}
        for slug, items in chosen.items():
            widget = tool.widget(slug)
            assert widget is not None
            self._check_accessible(widget, items, selected)
        return chosen

    @staticmethod
    def _check_accessible(widget: WidgetDef, items: Sequence[str], selected: set[str]) -> None:
        for slug in items:
            item = widget.item(slug)
            assert item is not None
            if item.accessible_in is not None and not set(item.accessible_in) & selected:
                raise _unprocessable(
                    "item_not_available",
                    f"item {slug} is available only when one of "
                    f"{', '.join(item.accessible_in)} is selected",
                )

    # ------------------------------------------------------------ lifecycle

    def start_processing(self, process: ProcessRecord) -> None:
        process.status = "processing"

    def finish(self, process: ProcessRecord, result: StoredFile | None) -> None:
        """Mark ``done`` with ``result`` as its output, or ``failed`` when ``result`` is None."""
        order = self.orders[process.order_id]
        if result is None:
            process.status = "failed"
            self.stats.processes_failed += 1
        else:
            process.result = AssetRecord(
                id=self.new_id(),
                order_id=order.id,
                role="result",
                asset_type="image",
                file=result,
            )
            self.assets[process.result.id] = process.result
            process.status = "done"
            self.stats.processes_done += 1
        order.updated_at = _now()
        order.modified_seq = self._next_seq()
        self.touch_project(order.project_id)

    # ------------------------------------------------------------- legacy V1

    def v1_tool(self, key: str, service_name: object) -> ToolDef:
        """``service-ai-virtual-staging`` -> the tool ``tool-virtual-staging`` (spec 9)."""
        if not isinstance(service_name, str) or not service_name:
            raise _bad("missing_field", "service_name is required, e.g. service-ai-virtual-staging")
        if not service_name.startswith("service-ai-"):
            raise _bad(
                "invalid_service",
                f"unknown service {service_name!r}; V1 names look like service-ai-virtual-staging",
            )
        return self.resolve_tool(key, "tool-" + service_name.removeprefix("service-ai-"))

    def v1_submit(self, key: str, body: object, now: float) -> list[ProcessRecord]:
        """Both V1 submit shapes, translated into a V3 process on the uploaded order."""
        if not isinstance(body, Mapping):
            raise _bad("invalid_body", "the body must be a JSON object with order_id")
        order_id = body.get("order_id")
        if not isinstance(order_id, str) or not order_id:
            raise _bad("missing_field", "order_id is required (from POST /v1/order/image)")
        order = self.get_order(key, order_id)
        service = body.get("service_name") or order.v1_service
        tool = self.v1_tool(key, service)
        widgets: dict[str, list[str]] = {}

        def select(widget: WidgetDef, item_slug: str) -> None:
            widgets.setdefault(widget.slug, []).append(item_slug)

        if "selected_widgets" in body or "space_name" in body:
            space = body.get("space_name")
            if space:
                space_widget = next((w for w in tool.widgets if w.key == "space"), None)
                value = str(space).removeprefix("space-")
                item = (
                    None
                    if space_widget is None
                    else space_widget.item(f"item-{value}-{space_widget.slug}")
                )
                if space_widget is None or item is None:
                    raise _unprocessable(
                        "invalid_space", f"space {space!r} is not a space of {tool.slug}"
                    )
                select(space_widget, item.slug)
            for entry in body.get("selected_widgets") or []:
                if not isinstance(entry, Mapping):
                    raise _bad("invalid_field", "selected_widgets entries are {id, item_id}")
                found = self.catalogue.widget_by_id(str(entry.get("id")))
                if found is None or found[0] is not tool:
                    raise _unprocessable(
                        "invalid_widget", f"widget id {entry.get('id')!r} is not of {tool.slug}"
                    )
                widget = found[1]
                item_id = str(entry.get("item_id"))
                item = widget.item(item_id) or next(
                    (i for i in widget.items if str(i.legacy_id) == item_id), None
                )
                if item is None:
                    raise _unprocessable(
                        "invalid_item", f"item {item_id!r} does not belong to widget {widget.id}"
                    )
                select(widget, item.slug)
        elif "widget_ids" in body:
            ids = body.get("widget_ids")
            if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
                raise _bad("invalid_field", "widget_ids must be a list of integers")
            for legacy in ids:
                hit = self.catalogue.item_by_legacy_id(legacy)
                if hit is not None and hit[0] is tool:
                    select(hit[1], hit[2].slug)
                    continue
                found = self.catalogue.widget_by_id(str(legacy))
                if found is None or found[0] is not tool:
                    raise _unprocessable(
                        "invalid_widget", f"widget id {legacy} is not of {tool.slug}"
                    )
                default = next((i for i in found[1].items if i.is_default), found[1].items[0])
                select(found[1], default.slug)
        style = next((w for w in tool.widgets if w.key == "style"), None)
        if style is not None and style.slug not in widgets:
            raise _bad("missing_field", f"the style widget is mandatory for {service}")
        for widget in tool.widgets:  # V1 fills other required settings with their defaults
            if not widget.is_optional and widget.slug not in widgets:
                default = next((i for i in widget.items if i.is_default), widget.items[0])
                select(widget, default.slug)
        primary = next(a for a in order.assets if a.role == "primary_angle")
        return self.create_process(
            key,
            {
                "order_id": order.id,
                "tool": tool.slug,
                "asset_map": {tool.slots[0]: primary.id},
                "widgets": [{"slug": s, "item_slugs": i} for s, i in widgets.items()],
            },
            now,
        )


def _sorted(items: Sequence[Any], sort: str) -> list[Any]:
    if sort == "asc":
        return sorted(items, key=lambda r: r.created_seq)
    if sort == "modified":
        return sorted(items, key=lambda r: r.modified_seq, reverse=True)
    return sorted(items, key=lambda r: r.created_seq, reverse=True)
