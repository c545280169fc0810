"""Checked plans kept per request, so that a request made again is not planned again.

The one speed measure of the catalogue layer.  Planning a process request against the catalogue
(the tool, each widget and item by any of their names, the required widgets, the
``accessibleIn`` rules) costs 14 to 23 us hot.  The key holds the asset map, so only a request
made again with the same assets is answered from here: 201,768 of a create's 846,983
instructions saved (``python -m benchmarks.instructions --variants
client-create,client-create-same``).  A batch of new photos names new assets and never hits it;
the client benchmark's creates do so since they name a new asset each (see
``benchmarks/FINDINGS.md``, "Costs that cannot creep" and "Kept: the plan memo").

A plan is kept only when it was checked against the catalogue (``validate=True``) and did not need
the order's assets; it is used again only while the cache serves the very tool list and widgets it
was checked against, so a refresh of the catalogue plans every request afresh.  The key is the
request's arguments frozen into tuples; arguments of any other type than ``str``, ``None``,
mappings, sequences and :class:`~asyncsdk.WidgetSelection` are not kept, so two equal keys always
come from arguments that pass or fail the same checks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

import attrs

from asyncsdk._catalogue.snapshot import WidgetSelection
from asyncsdk._checks import is_mapping, is_sequence
from asyncsdk._models import Tool, Widget

#: What is kept: the plan of ``plan.py``.
P = TypeVar("P")

__all__ = ["KeptPlan", "PlanMemo", "plan_key"]

#: How many distinct requests keep their plan (least recently used first out).
PLANS_KEPT: Final = 256


class _Unkeyable(Exception):
    """An argument the memo does not key on."""


def _frozen(value: object) -> Hashable:
    # str, dict, list and tuple are told apart before the abstract classes are asked, whose checks
    # cost more: 3.7 against 6.9 us for the key of the benchmark's request.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) or (not isinstance(value, list | tuple) and is_mapping(value)):
        return ("mapping", *[(_frozen(k), _frozen(v)) for k, v in value.items()])
    if isinstance(value, list | tuple) or (is_sequence(value) and not isinstance(value, bytes)):
        return ("sequence", *[_frozen(item) for item in value])
    if isinstance(value, WidgetSelection):
        return value
    raise _Unkeyable


def plan_key(tool: object, asset_map: object, inputs: object, widgets: object) -> Hashable | None:
    """The memo key of a request's arguments; ``None`` when one of them is not keyed."""
    try:
        return _frozen((tool, asset_map, inputs, widgets))
    except _Unkeyable:
        return None


@attrs.frozen
class KeptPlan(Generic[P]):
    """A checked plan and the catalogue values it was checked against."""

    prepared: P
    tools: tuple[Tool, ...]
    widgets: tuple[Widget, ...]

    def checked_against(self, tools: tuple[Tool, ...], widgets: tuple[Widget, ...]) -> bool:
        """Whether these very values (the cache's current ones) are what it was checked with."""
        return self.tools is tools and self.widgets is widgets


@attrs.define
class PlanMemo(Generic[P]):
    """The last :data:`PLANS_KEPT` checked plans of one client, by :func:`plan_key`."""

    _plans: OrderedDict[Hashable, KeptPlan[P]] = attrs.field(factory=OrderedDict, init=False)

    def get(self, key: Hashable) -> KeptPlan[P] | None:
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
        return plan

    def keep(self, key: Hashable, plan: KeptPlan[P]) -> None:
        self._plans[key] = plan
        self._plans.move_to_end(key)
        if len(self._plans) > PLANS_KEPT:
            self._plans.popitem(last=False)
