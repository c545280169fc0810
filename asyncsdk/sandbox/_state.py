"""The sandbox's in-memory model of the service: every project, order, asset and process.

Plain methods on plain records (``_records.py``); no aiohttp, no disk, no clock other than the
timestamps written into records.  The rules of creating a process live in ``_process_rules.py``.
A broken rule raises :class:`~asyncsdk.sandbox._records.SandboxError`; the HTTP layer turns it
into ``{"error": ..., "key": ...}``.

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
- Projects, orders and processes are visible only to the key that created them (404 to others).
"""

from __future__ import annotations

import random
import secrets
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from asyncsdk.sandbox._catalogue import Catalogue
from asyncsdk.sandbox._catalogue_data import CATALOGUE
from asyncsdk.sandbox._config import SandboxConfig
from asyncsdk.sandbox._records import (
    ROLES,
    AssetRecord,
    Listing,
    OrderRecord,
    ProcessRecord,
    ProjectRecord,
    RateLimited,
    SandboxError,
    StoredFile,
    bad_request,
    check_role_counts,
    not_found,
    unprocessable,
    utc_now,
)
from asyncsdk.sandbox._stats import Stats

__all__ = ["SandboxState"]


@attrs.define
class SandboxState:
    """Every project, order, asset and process, and the rules of keeping them."""

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
        seed = self.config.seed
        # No seed: ids unique to this run, so a receiver's kept inbox does not take them for the
        # last run's; a seed: the same ids run after run.
        ids_seed = f"ids-{seed}" if seed is not None else secrets.token_hex(16)
        self._ids = random.Random(ids_seed)  # noqa: S311 - ids of a test double
        self._failures = random.Random(f"failures-{seed or 0}")  # noqa: S311 - seeded on purpose

    # ----------------------------------------------------------------- helpers

    def new_id(self) -> str:
        return f"{self._ids.getrandbits(96):024x}"

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def draw_failure(self) -> float:
        """The next draw of the seeded failure dice, in [0, 1)."""
        return self._failures.random()

    def touch_order(self, order: OrderRecord) -> None:
        """Mark ``order`` (and its project) as changed now."""
        order.updated_at = utc_now()
        order.modified_seq = self.next_seq()
        self.touch_project(order.project_id)

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

    # ---------------------------------------------------------------- projects

    def create_project(self, key: str, body: object) -> ProjectRecord:
        if not isinstance(body, Mapping):
            raise bad_request(
                "invalid_body", 'the body must be a JSON object such as {"address": ...}'
            )
        address = body.get("address")
        if address is None or (isinstance(address, str) and not address.strip()):
            raise bad_request("missing_field", "address is required: the property address or name")
        if not isinstance(address, str):
            raise bad_request("invalid_field", "address must be a string")
        return self._add_project(key, address.strip(), default=False)

    def _add_project(self, key: str, address: str, *, default: bool) -> ProjectRecord:
        seq = self.next_seq()
        project = ProjectRecord(
            id=self.new_id(),
            api_key=key,
            address=address,
            default=default,
            created_seq=seq,
            modified_seq=seq,
            updated_at=utc_now(),
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
            raise not_found("project", project_id)
        return project

    def touch_project(self, project_id: str) -> None:
        project = self.projects[project_id]
        project.modified_seq = self.next_seq()
        project.updated_at = utc_now()

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
            raise bad_request(
                "missing_field", "asset_file is required: send at least one image file"
            )
        if len(files) > self.config.max_files_per_order:
            raise bad_request(
                "too_many_files",
                f"{len(files)} files were sent; an order takes at most "
                f"{self.config.max_files_per_order}",
            )
        project = self.get_project(key, project_id) if project_id else self.default_project(key)
        check_role_counts(roles)
        if "primary_angle" not in roles:
            raise bad_request(
                "missing_primary_angle",
                "an order needs one primary_angle asset (the main photo); mark one file so",
            )
        now = utc_now()
        seq = self.next_seq()
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
            raise not_found("order", order_id)
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
                raise not_found("project", project_id)
            raise unprocessable(
                "project_mismatch",
                f"order {order_id!r} belongs to project {order.project_id!r}, not {project_id!r}",
            )
        role = (role or "mask").strip()
        if role not in ROLES:
            raise bad_request(
                "invalid_asset_role",
                f"asset role {role!r} is not one of {', '.join(sorted(ROLES))}",
            )
        asset_type = (asset_type or ("mask" if role == "mask" else "image")).strip()
        if asset_type not in {"image", "mask"}:
            raise bad_request(
                "invalid_asset_type", f"asset_type must be image or mask, got {asset_type!r}"
            )
        if (asset_type == "mask") != (role == "mask"):
            raise bad_request("invalid_asset_type", "asset_type mask goes with asset_role mask")
        check_role_counts([a.role for a in order.assets] + [role])
        return order, role, asset_type

    def append_asset(
        self, order: OrderRecord, role: str, asset_type: str, file: StoredFile
    ) -> AssetRecord:
        asset = self._add_asset(order.id, role, asset_type, file)
        order.assets.append(asset)
        self.touch_order(order)
        return asset

    # --------------------------------------------------------------- processes

    def get_process(self, key: str, process_id: str) -> ProcessRecord:
        process = self.processes.get(process_id)
        if process is None or process.api_key != key:
            raise not_found("process", process_id)
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

    # ------------------------------------------------------------ lifecycle

    def start_processing(self, process: ProcessRecord) -> None:
        process.status = "processing"
        process.started_at = utc_now()

    def finish(self, process: ProcessRecord, result: StoredFile | None) -> None:
        """Mark ``done`` with ``result`` as its output, or ``failed`` when ``result`` is None."""
        order = self.orders[process.order_id]
        process.finished_at = utc_now()
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
        self.touch_order(order)

    # ------------------------------------------------------------- legacy V1


def _sorted(items: Sequence[Any], sort: str) -> list[Any]:
    if sort == "asc":
        return sorted(items, key=lambda r: r.created_seq)
    if sort == "modified":
        return sorted(items, key=lambda r: r.modified_seq, reverse=True)
    return sorted(items, key=lambda r: r.created_seq, reverse=True)
