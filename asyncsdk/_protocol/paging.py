"""Listings page by page (no I/O apart from the fetch a caller hands in): the query of a listing,
the query of the page after, and the walk over every item."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Final, TypeVar
from urllib.parse import parse_qsl

from asyncsdk._checks import require_int
from asyncsdk._errors import ValidationError
from asyncsdk._models import Page
from asyncsdk._protocol.requests import query

__all__ = [
    "MAX_PAGE_SIZE",
    "SORT_ORDERS",
    "dimensions",
    "listing",
    "next_page_params",
    "walk",
]

T = TypeVar("T")

#: Largest page the service serves (spec 8).
MAX_PAGE_SIZE: Final = 30
SORT_ORDERS: Final = ("asc", "desc", "modified")


def dimensions(width: int | None, height: int | None) -> dict[str, str]:
    """The spec's optional ``width``/``height`` resize parameters."""
    for name, value in (("width", width), ("height", height)):
        if value is not None:
            require_int(value, f"{name} must be a positive int (pixels)")
    return query(width=width, height=height)


def listing(
    *, page: int, limit: int, sort: str, width: int | None, height: int | None
) -> dict[str, str]:
    """The query of one page of a listing, its arguments checked."""
    require_int(page, "page must be an int >= 1")
    require_int(
        limit,
        f"limit must be an int from 1 to {MAX_PAGE_SIZE} (the service's largest page)",
        maximum=MAX_PAGE_SIZE,
    )
    if sort not in SORT_ORDERS:
        raise ValidationError(f"sort must be one of {', '.join(SORT_ORDERS)}, not {sort!r}")
    return {"page": str(page), "limit": str(limit), "sort": sort, **dimensions(width, height)}


def next_page_params(
    next_page: str, current: Mapping[str, str], *, page: int, total_pages: int
) -> dict[str, str] | None:
    """The query of the page after ``page``, or ``None`` when it is the last one.

    ``next_page`` is the service's ``?page=<n>&limit=<n>`` string; its values are laid over
    ``current`` so sort, search and size parameters carry over.  A ``next_page`` that does not move
    forward ends the listing rather than looping.
    """
    if not next_page:
        return None
    raw = next_page.split("?", 1)[1] if "?" in next_page else next_page
    given = dict(parse_qsl(raw, keep_blank_values=True))
    params = {**current, **given}
    try:
        following = int(given.get("page", ""))
    except ValueError:
        following = page + 1
        if total_pages and following > total_pages:
            return None
        params["page"] = str(following)
    if following <= page:
        return None
    return params


async def walk(
    fetch: Callable[[dict[str, str]], Awaitable[Page[T]]], params: dict[str, str]
) -> AsyncIterator[T]:
    """Every item of every page, following ``next_page`` until it is empty."""
    current: dict[str, str] | None = params
    while current is not None:
        page = await fetch(current)
        for item in page.data:
            yield item
        if not page.data:
            return
        current = next_page_params(
            page.pagination.next_page,
            current,
            page=int(current["page"]),
            total_pages=page.pagination.total_pages,
        )
