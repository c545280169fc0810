"""Chaos rules: make chosen requests fail the way real networks and proxies do.

A rule targets a method and a path pattern and fires ``times`` times (``None``: until cleared),
each time with ``probability``.  The pattern matches either the request path (``fnmatch`` globs:
``/v3/process/*``) or the route template (``/v3/process/{id}``).  Pure logic; the aiohttp
middleware in ``_edge.py`` carries the rules out.

Kinds (``ChaosKind``):

- ``status``: answer ``status`` (default 503) with a JSON error body, before any processing;
  ``Retry-After`` when ``retry_after`` is set.
- ``rate_limit``: answer 429 ``{"error": "rate-limit exceeded, ..."}``; ``Retry-After`` only when
  ``retry_after`` is set.
- ``slow``: wait ``delay`` seconds before processing and sending headers.
- ``slow_body``: process, send the headers, then trickle the body over ``delay`` seconds.
- ``drop_before``: close the connection before processing (nothing changed).
- ``drop_after``: process (state changes), then close the connection without an answer.
- ``truncated_json``: process, then send only the first half of the JSON body.
- ``html``: answer ``status`` (default 502) with an HTML page, as a proxy in front would.
"""

from __future__ import annotations

import random
from fnmatch import fnmatchcase
from typing import Any, Final

import attrs

__all__ = ["Chaos", "ChaosKind", "ChaosRule"]


class ChaosKind:
    STATUS: Final = "status"
    RATE_LIMIT: Final = "rate_limit"
    SLOW: Final = "slow"
    SLOW_BODY: Final = "slow_body"
    DROP_BEFORE: Final = "drop_before"
    DROP_AFTER: Final = "drop_after"
    TRUNCATED_JSON: Final = "truncated_json"
    HTML: Final = "html"
    ALL: Final = frozenset(
        {STATUS, RATE_LIMIT, SLOW, SLOW_BODY, DROP_BEFORE, DROP_AFTER, TRUNCATED_JSON, HTML}
    )
    # Kinds carried out after the handler ran (the request's effects happen).
    AFTER: Final = frozenset({SLOW_BODY, DROP_AFTER, TRUNCATED_JSON})


def _check_kind(_: object, __: attrs.Attribute[str], value: str) -> None:
    if value not in ChaosKind.ALL:
        raise ValueError(f"unknown chaos kind {value!r}; use one of {sorted(ChaosKind.ALL)}")


def _check_probability(_: object, __: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"probability must be between 0 and 1, got {value}")


@attrs.define(kw_only=True)
class ChaosRule:
    method: str = "*"
    path: str = "*"
    kind: str = attrs.field(default=ChaosKind.STATUS, validator=_check_kind)
    status: int | None = None
    times: int | None = 1
    probability: float = attrs.field(default=1.0, validator=_check_probability)
    retry_after: float | str | None = None
    delay: float = 1.0
    fired: int = 0

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    @property
    def effective_status(self) -> int:
        if self.status is not None:
            return self.status
        return {ChaosKind.RATE_LIMIT: 429, ChaosKind.HTML: 502}.get(self.kind, 503)

    def matches(self, method: str, path: str, route: str) -> bool:
        if self.method != "*" and self.method.upper() != method.upper():
            return False
        return self.path in {path, route} or fnmatchcase(path, self.path)

    def wire(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class Chaos:
    """The live rule list of one sandbox."""

    rng: random.Random = attrs.field(factory=random.Random)
    rules: list[ChaosRule] = attrs.Factory(list)

    def add(
        self,
        *,
        method: str = "*",
        path: str = "*",
        kind: str = ChaosKind.STATUS,
        status: int | None = None,
        times: int | None = 1,
        probability: float = 1.0,
        retry_after: float | str | None = None,
        delay: float = 1.0,
    ) -> ChaosRule:
        """Add a rule; e.g. ``add(method="POST", path="/v3/process", status=503, times=2)``."""
        rule = ChaosRule(
            method=method,
            path=path,
            kind=kind,
            status=status,
            times=times,
            probability=probability,
            retry_after=retry_after,
            delay=delay,
        )
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        self.rules.clear()

    def pick(self, method: str, path: str, route: str) -> ChaosRule | None:
        """The first live rule matching the request that fires now (and count it), or None."""
        for rule in self.rules:
            if rule.exhausted or not rule.matches(method, path, route):
                continue
            if rule.probability < 1.0 and self.rng.random() >= rule.probability:
                continue
            rule.fired += 1
            return rule
        return None
