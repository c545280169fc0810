"""Records -> wire JSON, exactly as the service spells it (spec 2, 4 and 6)."""

from __future__ import annotations

from typing import Any

import attrs
from yarl import URL

from asyncsdk.sandbox._files import EXTENSIONS
from asyncsdk.sandbox._records import (
    AssetRecord,
    OrderRecord,
    ProcessRecord,
    ProjectRecord,
    StoredFile,
    iso,
)
from asyncsdk.sandbox._state import SandboxState

__all__ = ["Urls", "asset_json", "order_json", "process_json", "project_json", "webhook_json"]


@attrs.frozen
class Urls:
    """How file URLs are written: the server origin, a resize request, a per-delivery token."""

    base: str
    width: int | None = None
    height: int | None = None
    token: str | None = None

    def _query(self, extra: dict[str, str]) -> dict[str, str]:
        query = dict(extra)
        if self.token:
            query["token"] = self.token
        return query

    def src(self, stored: StoredFile) -> str:
        query: dict[str, str] = {}
        if self.width:
            query["width"] = str(self.width)
        if self.height:
            query["height"] = str(self.height)
        url = URL(f"{self.base}/files/{stored.id}/original.{EXTENSIONS[stored.format]}")
        return str(url.with_query(self._query(query)) if query or self.token else url)

    def thumbnail(self, stored: StoredFile) -> str:
        url = URL(f"{self.base}/files/{stored.id}/thumbnail.{EXTENSIONS[stored.format]}")
        return str(url.with_query(self._query({})) if self.token else url)


def project_json(state: SandboxState, project: ProjectRecord, urls: Urls) -> dict[str, Any]:
    orders = state.project_orders(project)
    inputs = [a for o in orders for a in o.assets if a.role != "mask"]
    results = [p.result for o in orders for p in o.processes if p.result is not None]
    cover = next((a for a in inputs if a.role == "primary_angle"), None)
    return {
        "id": project.id,
        "address": project.address,
        "cover_src": urls.src(cover.file) if cover else "",
        "input_count": len(inputs),
        "result_count": len(results),
        "bookmarked_count": 0,
        "default": project.default,
        "updated_at": project.updated_at.strftime("%Y-%m-%d"),
    }


def asset_json(asset: AssetRecord, urls: Urls, *, thumbnail: bool = True) -> dict[str, Any]:
    out = {
        "id": asset.id,
        "asset_type": asset.asset_type,
        "asset_role": asset.role,
        "src": urls.src(asset.file),
    }
    if thumbnail:
        out["thumbnail_src"] = urls.thumbnail(asset.file)
    return out


def final_assets(process: ProcessRecord, urls: Urls) -> list[dict[str, Any]]:
    if process.result is None:
        return []
    return [
        {
            "asset_id": process.result.id,
            "asset_type": "image",
            "asset_role": "result",
            "src": urls.src(process.result.file),
            "thumbnail_src": urls.thumbnail(process.result.file),
        }
    ]


def process_json(process: ProcessRecord, urls: Urls) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": process.id,
        "tool": process.tool,
        "status": process.status,
        "final_assets": final_assets(process, urls),
        "bookmarked": False,
        "feedback": {"type": "", "description": ""},
    }
    if process.process_group_id:
        out["process_group_id"] = process.process_group_id
    return out


def order_json(order: OrderRecord, urls: Urls) -> dict[str, Any]:
    return {
        "id": order.id,
        "project_id": order.project_id,
        "entry_assets": [asset_json(a, urls) for a in order.assets],
        "status": order.status,
        "created_at": iso(order.created_at),
        "updated_at": iso(order.updated_at),
        "processes": [
            {
                "id": p.id,
                "tool": p.tool,
                "status": p.status,
                "final_assets": final_assets(p, urls),
            }
            for p in order.processes
        ],
    }


def webhook_json(process: ProcessRecord, urls: Urls) -> dict[str, Any]:
    """The ``process.completed`` event (spec 6): ``temp_src``/``temp_thumbnail_src`` spellings."""
    assets = []
    if process.result is not None:
        assets.append(
            {
                "asset_id": process.result.id,
                "asset_type": "image",
                "temp_src": urls.src(process.result.file),
                "temp_thumbnail_src": urls.thumbnail(process.result.file),
            }
        )
    return {
        "event": "process.completed",
        "process_id": process.id,
        "order_id": process.order_id,
        "tool": process.tool,
        "status": process.status,
        "final_assets": assets,
    }
