"""Typed, frozen models of every resource and response of the service.

Models hold values only: no I/O, no (de)serialisation.  Decoding from the wire lives in
``_protocol/convert.py``.  The one thing a model gives beyond its fields is what
:class:`ProcessCompleted` tells a webhook inbox, which stores and shows it: its fields as plain
values, its names for an operator, a one-line summary (no text format: the inbox encodes them).
Server-controlled values (statuses, roles, slugs) are plain ``str``; the known values are
constants on the small namespaces below, never closed enums, so a value the service adds
tomorrow still parses.
"""

from __future__ import annotations

from typing import Final, Generic, TypeVar

import attrs

__all__ = [
    "Asset",
    "AssetRole",
    "CreatedOrder",
    "CreatedProcesses",
    "Feedback",
    "MaskReport",
    "Order",
    "OrderProcess",
    "OrderStatus",
    "Page",
    "Pagination",
    "Process",
    "ProcessCompleted",
    "ProcessStatus",
    "Project",
    "ResultAsset",
    "Tool",
    "ToolSlug",
    "V1Submitted",
    "V1Upload",
    "Widget",
    "WidgetItem",
]

T = TypeVar("T")


class ProcessStatus:
    """Known values of ``Process.status``; others may appear and still parse."""

    PENDING: Final = "pending"
    PROCESSING: Final = "processing"
    DONE: Final = "done"
    FAILED: Final = "failed"
    FINISHED: Final = frozenset({DONE, FAILED})


class OrderStatus:
    """Known values of ``Order.status``."""

    IDLE: Final = "idle"
    ACTIVE: Final = "active"


class AssetRole:
    """Known values of ``asset_role``."""

    PRIMARY_ANGLE: Final = "primary_angle"
    SECONDARY_ANGLE: Final = "secondary_angle"
    MASK: Final = "mask"
    RESULT: Final = "result"


class ToolSlug:
    """Tool slugs of the catalogue (spec 2.4); ``FURNITURE_RESTYLE`` aliases the set restyle."""

    VIRTUAL_STAGING: Final = "tool-virtual-staging"
    VIRTUAL_RESTAGING: Final = "tool-virtual-restaging"
    ITEM_REMOVAL: Final = "tool-item-removal"
    ITEM_REMOVAL_MASK: Final = "tool-item-removal-mask"
    IMAGE_ENHANCEMENT: Final = "tool-image-enhancement"
    INTERIOR_DESIGN: Final = "tool-interior-design"
    FURNITURE_SET_RESTYLE: Final = "tool-furniture-set-restyle"
    FURNITURE_RESTYLE: Final = "tool-furniture-restyle"
    WALL_CHANGE: Final = "tool-wall-change"
    FLOOR_CHANGE: Final = "tool-floor-change"
    CEILING_CHANGE: Final = "tool-ceiling-change"
    BACKSPLASH_CHANGE: Final = "tool-backsplash-change"
    UNDER_CONSTRUCTION: Final = "tool-under-construction"
    DAY_TO_DUSK: Final = "tool-day-to-dusk"


@attrs.frozen(kw_only=True)
class Project:
    """A property: the container of orders (spec 2.1)."""

    id: str
    address: str
    cover_src: str = ""
    input_count: int = 0
    result_count: int = 0
    bookmarked_count: int = 0
    default: bool = False
    updated_at: str = ""


@attrs.frozen(kw_only=True)
class Pagination:
    """Where a page stands (spec 4.3). ``previous_page``/``next_page`` are ``""`` when none."""

    page: int
    limit: int
    total_count: int
    total_pages: int
    previous_page: str = ""
    next_page: str = ""

    @property
    def has_next(self) -> bool:
        """Whether a page follows this one."""
        return bool(self.next_page)


@attrs.frozen(kw_only=True)
class Page(Generic[T]):
    """One page of a listing and its pagination."""

    data: tuple[T, ...]
    pagination: Pagination


@attrs.frozen(kw_only=True)
class Asset:
    """An input image of an order. ``thumbnail_src`` is ``""`` in the order-creation answer."""

    id: str
    src: str = ""
    asset_type: str = "image"
    asset_role: str = AssetRole.PRIMARY_ANGLE
    thumbnail_src: str = ""


@attrs.frozen(kw_only=True)
class ResultAsset:
    """An output image. ``src`` is read from ``src`` or ``temp_src`` (webhook spelling)."""

    asset_id: str
    src: str = ""
    thumbnail_src: str = ""
    asset_type: str = "image"
    asset_role: str = AssetRole.RESULT


@attrs.frozen(kw_only=True)
class Feedback:
    type: str = ""
    description: str = ""


@attrs.frozen(kw_only=True)
class Process:
    """One AI job (spec 2.3)."""

    id: str
    tool: str
    status: str
    final_assets: tuple[ResultAsset, ...] = ()
    bookmarked: bool = False
    feedback: Feedback = Feedback()
    process_group_id: str | None = None

    @property
    def is_finished(self) -> bool:
        """True once the status is ``done`` or ``failed``."""
        return self.status in ProcessStatus.FINISHED

    @property
    def succeeded(self) -> bool:
        """Whether the process finished ``done`` (not ``failed``)."""
        return self.status == ProcessStatus.DONE


@attrs.frozen(kw_only=True)
class OrderProcess:
    """A process as listed inside an order."""

    id: str
    tool: str
    status: str
    final_assets: tuple[ResultAsset, ...] = ()


@attrs.frozen(kw_only=True)
class Order:
    """A bundle of input images and the processes run on them (spec 2.2)."""

    id: str
    project_id: str = ""
    entry_assets: tuple[Asset, ...] = ()
    status: str = OrderStatus.IDLE
    created_at: str = ""
    updated_at: str = ""
    processes: tuple[OrderProcess, ...] = ()


@attrs.frozen(kw_only=True)
class CreatedOrder:
    """The answer to order creation (spec 4.5) and to appending a mask (4.6)."""

    order_id: str
    assets: tuple[Asset, ...] = ()


@attrs.frozen(kw_only=True)
class CreatedProcesses:
    """The answer to process creation: one request may create several processes."""

    process_ids: tuple[str, ...]
    process_group_id: str | None = None


@attrs.frozen(kw_only=True)
class Tool:
    """A tool of the catalogue (spec 2.4)."""

    id: str
    name: str
    slug: str
    is_active: bool = True


@attrs.frozen(kw_only=True)
class WidgetItem:
    """One choice of a widget. ``accessible_in`` is ``None`` when unrestricted."""

    slug: str
    name: str = ""
    description: str = ""
    prompt: str = ""
    priority: int = 0
    is_active: bool = True
    is_default: bool = False
    icon_src: str = ""
    accessible_in: tuple[str, ...] | None = None


@attrs.frozen(kw_only=True)
class Widget:
    """A setting of a tool and its items (spec 2.5)."""

    id: str
    slug: str
    name: str = ""
    description: str = ""
    is_optional: bool = True
    is_active: bool = True
    priority: int = 0
    type: str = ""
    tool: str = ""
    items: tuple[WidgetItem, ...] = ()
    related: tuple[str, ...] | None = None
    key: str = ""
    created_at: str = ""
    updated_at: str = ""


@attrs.frozen(kw_only=True)
class ProcessCompleted:
    """The ``process.completed`` webhook event (spec 6)."""

    event: str
    process_id: str
    order_id: str
    tool: str
    status: str
    final_assets: tuple[ResultAsset, ...] = ()

    @property
    def dedup_key(self) -> tuple[str, str, str]:
        """(event, process_id, status): the identity of a delivery; never a hash of the body."""
        return (self.event, self.process_id, self.status)

    @property
    def succeeded(self) -> bool:
        """Whether the process finished ``done`` (not ``failed``)."""
        return self.status == ProcessStatus.DONE

    def storage_fields(self) -> dict[str, object]:
        """What a webhook inbox stores of the event: every field by its own name, as JSON values
        (``final_assets`` a list of objects), which :func:`asyncsdk.structure` reads back."""
        return {
            "event": self.event,
            "process_id": self.process_id,
            "order_id": self.order_id,
            "tool": self.tool,
            "status": self.status,
            "final_assets": [
                {
                    "asset_id": asset.asset_id,
                    "src": asset.src,
                    "thumbnail_src": asset.thumbnail_src,
                    "asset_type": asset.asset_type,
                    "asset_role": asset.asset_role,
                }
                for asset in self.final_assets
            ],
        }

    def describe(self) -> dict[str, str]:
        """What an operator reads of the event, by name: ``process_id``, ``status`` and
        ``tool`` (``asyncsdk inbox dead`` lists them; logs and spans carry the process id)."""
        return {"process_id": self.process_id, "status": self.status, "tool": self.tool}

    @property
    def summary(self) -> str:
        """The event in a log line: ``process p-1 (done)``."""
        return f"process {self.process_id} ({self.status})"


@attrs.frozen(kw_only=True)
class V1Upload:
    """The answer to the legacy image upload (spec 4.13)."""

    order_id: str


@attrs.frozen(kw_only=True)
class V1Submitted:
    """The answer to the legacy order submit; the spec shows no body, so fields may be empty."""

    order_id: str = ""
    status: str = ""


@attrs.frozen(kw_only=True)
class MaskReport:
    """What a mask marks: pixel counts of remove (blue), keep (black) and stray colours."""

    width: int
    height: int
    remove_pixels: int
    keep_pixels: int
    stray_pixels: int

    @property
    def total_pixels(self) -> int:
        """Pixels of the mask: ``width * height``."""
        return self.width * self.height

    @property
    def remove_fraction(self) -> float:
        """Share of the image marked for removal, 0.0 to 1.0."""
        return self.remove_pixels / self.total_pixels

    @property
    def stray_fraction(self) -> float:
        """Share of pixels that are neither blue nor black (JPEG artefacts, anti-aliased edges)."""
        return self.stray_pixels / self.total_pixels
