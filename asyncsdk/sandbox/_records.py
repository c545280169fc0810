"""The sandbox's records and the parsers of request values (spec 2, 4.3, 4.5).

Plain ``attrs`` records of projects, orders, assets, processes and stored files, the error a broken
rule raises (:class:`SandboxError`, carrying the HTTP status, the ``api_error_...`` key and a
message that names the fix), and the parsers of listing queries, image sizes and asset roles.
No aiohttp, no disk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from asyncsdk.sandbox._catalogue import ToolDef

__all__ = [
    "RATE_LIMIT_MESSAGE",
    "ROLES",
    "AssetRecord",
    "Listing",
    "OrderRecord",
    "ProcessRecord",
    "ProjectRecord",
    "RateLimited",
    "SandboxError",
    "StoredFile",
    "bad_request",
    "check_role_counts",
    "iso",
    "not_found",
    "parse_listing",
    "parse_size",
    "resolve_roles",
    "unprocessable",
    "utc_now",
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


def bad_request(key: str, message: str) -> SandboxError:
    return SandboxError(400, f"api_error_{key}", message)


def unprocessable(key: str, message: str) -> SandboxError:
    return SandboxError(422, f"api_error_{key}", message)


def not_found(what: str, ident: str) -> SandboxError:
    return SandboxError(404, f"api_error_{what}_not_found", f"{what} {ident!r} does not exist")


def utc_now() -> datetime:
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
    created_at: datetime = attrs.Factory(utc_now)
    started_at: datetime | None = None
    finished_at: datetime | None = None

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
        raise bad_request(f"invalid_{name}", f"{name} must be an integer, got {raw!r}") from None


def parse_listing(query: Mapping[str, str]) -> Listing:
    """Validate ``page``, ``limit``, ``sort`` and ``s``; every bad value is a 400 naming the fix."""
    page = _int_param(query, "page", 1)
    limit = _int_param(query, "limit", DEFAULT_PAGE_SIZE)
    assert page is not None
    assert limit is not None
    if page < 1:
        raise bad_request("invalid_page", f"page must be 1 or more, got {page}")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise bad_request(
            "invalid_limit", f"limit must be between 1 and {MAX_PAGE_SIZE}, got {limit}"
        )
    sort = query.get("sort") or "desc"
    if sort not in SORTS:
        raise bad_request("invalid_sort", f"sort must be one of {', '.join(SORTS)}; got {sort!r}")
    search = query.get("s") or None
    return Listing(page=page, limit=limit, sort=sort, search=search)


def parse_size(query: Mapping[str, str]) -> tuple[int | None, int | None]:
    """``width``/``height`` query parameters: positive integers up to 10000, or absent."""
    out: list[int | None] = []
    for name in ("width", "height"):
        value = _int_param(query, name, None)
        if value is not None and not 1 <= value <= 10_000:
            raise bad_request(f"invalid_{name}", f"{name} must be between 1 and 10000, got {value}")
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
                raise bad_request(
                    "invalid_asset_role", f"asset_roles is not a JSON list: {raw!r}"
                ) from None
            if not isinstance(parsed, list) or not all(isinstance(r, str) for r in parsed):
                raise bad_request(
                    "invalid_asset_role", "asset_roles must be a list of role strings"
                )
            return [r.strip() for r in parsed]
        if "," in raw:
            return [r.strip() for r in raw.split(",")]
    return [v.strip() for v in values]


def resolve_roles(n_files: int, asset_role: Sequence[str], asset_roles: Sequence[str]) -> list[str]:
    """One role per file, positionally aligned; missing trailing roles default to primary_angle."""
    if asset_role and asset_roles:
        raise bad_request(
            "invalid_asset_role",
            "send the roles under asset_role (repeated) or asset_roles, not both",
        )
    roles = _split_roles(asset_role or asset_roles)
    if len(roles) > n_files:
        raise bad_request(
            "invalid_asset_role",
            f"{len(roles)} asset roles were sent for {n_files} file(s); send one role per file",
        )
    for role in roles:
        if role not in ROLES:
            raise bad_request(
                "invalid_asset_role",
                f"asset role {role!r} is not one of {', '.join(sorted(ROLES))}",
            )
    return roles + ["primary_angle"] * (n_files - len(roles))


def check_role_counts(roles: Iterable[str]) -> None:
    roles = list(roles)
    for role in ("primary_angle", "secondary_angle"):
        if roles.count(role) > 1:
            raise bad_request(
                "duplicate_asset_role",
                f"an order holds at most one {role} asset; {roles.count(role)} were sent",
            )
