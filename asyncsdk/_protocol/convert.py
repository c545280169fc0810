"""The private cattrs converter: wire JSON -> frozen models.

One converter per client, built by :func:`make_converter`.  Lenient by default (unknown keys
are ignored so the service may add fields); ``strict=True`` forbids unknown keys and is what the
tests use against recorded fixtures.  Field renames for the catalogue's camelCase keys and the two
spellings of result URLs (``src``/``temp_src``) live here, not in the models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs
from cattrs.gen import make_dict_structure_fn, override

from asyncsdk._models import (
    CreatedProcesses,
    Pagination,
    ResultAsset,
    Tool,
    Widget,
    WidgetItem,
)

__all__ = ["make_converter", "structure", "unwrap_envelope"]

T = TypeVar("T")


_CAMEL = {
    Tool: {"is_active": "isActive"},
    WidgetItem: {
        "is_active": "isActive",
        "is_default": "isDefault",
        "icon_src": "iconSrc",
        "accessible_in": "accessibleIn",
    },
    Widget: {
        "is_optional": "isOptional",
        "is_active": "isActive",
        "created_at": "createdAt",
        "updated_at": "updatedAt",
    },
}


def make_converter(*, strict: bool = False) -> cattrs.Converter:
    """Build the converter. ``strict`` forbids unknown keys (for tests against fixtures)."""
    conv = cattrs.Converter(forbid_extra_keys=strict)

    for cls, renames in _CAMEL.items():
        overrides: dict[str, Any] = {name: override(rename=wire) for name, wire in renames.items()}
        conv.register_structure_hook(
            cls,
            make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=strict, **overrides),
        )

    plain_result = make_dict_structure_fn(ResultAsset, conv, _cattrs_forbid_extra_keys=strict)

    def structure_result(value: Any, _: type[ResultAsset]) -> ResultAsset:
        if not isinstance(value, Mapping):
            raise TypeError(f"a result asset must be an object, not {type(value).__name__}")
        if "temp_src" not in value and "temp_thumbnail_src" not in value:
            return plain_result(value, ResultAsset)
        data = dict(value)
        # Webhooks say temp_src/temp_thumbnail_src, GET answers say src/thumbnail_src.
        for short, temp in (("src", "temp_src"), ("thumbnail_src", "temp_thumbnail_src")):
            if temp in data:
                temp_value = data.pop(temp)
                data.setdefault(short, temp_value)
        return plain_result(data, ResultAsset)

    conv.register_structure_hook(ResultAsset, structure_result)

    plain_pagination = make_dict_structure_fn(Pagination, conv, _cattrs_forbid_extra_keys=strict)

    def structure_pagination(value: Any, _: type[Pagination]) -> Pagination:
        if not isinstance(value, Mapping):
            raise TypeError("pagination must be an object")
        data = dict(value)
        for name in ("previous_page", "next_page"):
            if data.get(name) is None:
                data[name] = ""
        return plain_pagination(data, Pagination)

    conv.register_structure_hook(Pagination, structure_pagination)

    general_created = make_dict_structure_fn(
        CreatedProcesses, conv, _cattrs_forbid_extra_keys=strict
    )

    def structure_created(value: Any, _: type[CreatedProcesses]) -> CreatedProcesses:
        # A string is a sequence too: without this check it would be read as one id per letter.
        if isinstance(value, Mapping) and isinstance(value.get("process_ids"), str):
            raise TypeError("process_ids must be a list of ids, not a string")
        return general_created(value, CreatedProcesses)

    conv.register_structure_hook(CreatedProcesses, structure_created)
    return conv


def unwrap_envelope(body: Any) -> Any:
    """Strip the live API's ``{"data": ..., "message": ...}`` envelope from an object answer.

    Only an object inside ``data`` is unwrapped: list answers (``{data: [...], pagination}``)
    have the same shape in both forms and are decoded as they are.
    """
    if (
        isinstance(body, Mapping)
        and isinstance(body.get("data"), Mapping)
        and "pagination" not in body
        and set(body) <= {"data", "message", "status", "success"}
    ):
        return body["data"]
    return body


_SHARED = make_converter()


def structure(value: Any, cls: type[T]) -> T:
    """Build ``cls`` (a model such as :class:`~asyncsdk.ProcessCompleted`) from decoded JSON with
    the converter the client uses (lenient on unknown keys)."""
    return _SHARED.structure(value, cls)
