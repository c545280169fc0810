"""What a Redis server's persistence promises the inbox, and the strict mode's step (no I/O here).

:class:`Persistence` is what the inbox read from the server at start (``INFO``, and ``CONFIG GET``
where the server allows it); :func:`crash_loss` says in one sentence what a crash of its host can
lose; :func:`strict_step` says how the strict mode makes each put durable before its answer (the
server's ``appendfsync always``, ``WAITAOF`` on 7.2+, or ``WAIT`` for replicas), or refuses the
server with the fix to apply.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from asyncsdk import ConfigurationError

__all__ = [
    "DURABILITY_MODES",
    "RELAXED",
    "STRICT",
    "Persistence",
    "StrictStep",
    "crash_loss",
    "last_loss",
    "loss_line",
    "refuse_cluster",
    "start_line",
    "strict_step",
]

RELAXED: Final = "relaxed"
"""Answer once Redis has the write; what a crash loses is the server's persistence's window."""
STRICT: Final = "strict"
"""Answer once the write is on disk (fsynced) or on replicas."""
DURABILITY_MODES: Final = (RELAXED, STRICT)

_WAITAOF_SINCE: Final = (7, 2)


@attrs.frozen(kw_only=True)
class Persistence:
    """A Redis server's persistence, as read at start.  ``None`` means the server would not say."""

    version: str
    """``redis_version`` of ``INFO server`` ("" when INFO was refused)."""
    appendonly: str | None
    """``yes`` or ``no``: the append-only file (``CONFIG GET appendonly``, else ``INFO``)."""
    appendfsync: str | None
    """``always``, ``everysec`` or ``no`` (``CONFIG GET appendfsync``)."""
    save: str | None
    """The RDB snapshot schedule (``CONFIG GET save``); ``""`` when snapshots are off."""
    replicas: int
    """Replicas connected to it (``INFO replication``)."""
    refused: str | None = None
    """Why ``CONFIG GET`` (or ``INFO``) could not be read: a managed Redis may refuse it."""
    mode: str = "standalone"
    """``redis_mode`` of ``INFO server``: ``standalone``, ``cluster`` or ``sentinel``."""

    @classmethod
    def read(
        cls,
        info: Mapping[str, Any],
        config: Mapping[str, Any] | None,
        refused: str | None,
    ) -> Persistence:
        """From ``INFO`` (server, replication and persistence sections merged) and ``CONFIG GET
        appendonly appendfsync save`` (``None`` when refused, with why in ``refused``)."""
        config = config or {}
        appendonly = _text(config.get("appendonly"))
        if appendonly is None and "aof_enabled" in info:
            appendonly = "yes" if str(info["aof_enabled"]) == "1" else "no"
        return cls(
            version=str(info.get("redis_version", "")),
            appendonly=appendonly,
            appendfsync=_text(config.get("appendfsync")),
            save=_text(config.get("save")),
            replicas=int(info.get("connected_slaves", 0) or 0),
            refused=refused,
            mode=str(info.get("redis_mode", "standalone")),
        )

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", self.version)[:3])

    def describe(self) -> str:
        """The settings, as an operator writes them: ``appendonly yes, appendfsync everysec``."""
        parts = [f"appendonly {self.appendonly or 'unknown'}"]
        if self.appendonly != "no":
            parts.append(f"appendfsync {self.appendfsync or 'unknown'}")
        else:
            save = "unknown" if self.save is None else repr(self.save)
            parts.append(f"RDB save {save}")
        if self.replicas:
            parts.append(f"{self.replicas} replica{'s' if self.replicas != 1 else ''} connected")
        refused = f" (CONFIG GET refused: {self.refused})" if self.refused else ""
        return ", ".join(parts) + refused


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def crash_loss(persistence: Persistence) -> str:
    """What a crash of the Redis host can lose of the deliveries already answered 2xx."""
    p = persistence
    if p.appendonly == "yes":
        if p.appendfsync == "always":
            return "a host crash loses nothing acknowledged"
        if p.appendfsync == "everysec":
            return "a host crash can lose up to about 1 s of acknowledged deliveries"
        if p.appendfsync == "no":
            return (
                "a host crash can lose the acknowledged deliveries the OS had not yet written"
                " (up to about 30 s)"
            )
        return (
            "a host crash can lose up to about 1 s of acknowledged deliveries with appendfsync"
            " everysec (the default), nothing with always"
        )
    if p.appendonly == "no":
        if p.save == "":
            return "a restart of Redis loses every acknowledged delivery since it started"
        return "a host crash can lose every acknowledged delivery since the last RDB snapshot"
    return "what a host crash can lose is unknown (the server would not say how it persists)"


@attrs.frozen
class StrictStep:
    """How a strict put becomes durable before its answer: ``command``, sent after the puts of
    each pipeline on the same connection, waits for the replicas or the fsync (``WAIT``,
    ``WAITAOF``), or checks that the server that ran them still fsyncs each write before it
    answers (``CONFIG GET``): a restart with another ``redis.conf`` or a ``CONFIG SET`` since the
    start fails the puts instead of answering them 2xx."""

    command: tuple[str | int, ...]
    replicas: int
    timeout: float
    said: str
    """What it guarantees, for the start-up line."""

    def failure(self, reply: object) -> str | None:
        """Why ``reply`` (to ``command``) does not confirm the writes before it, or ``None``."""
        if isinstance(reply, BaseException):
            return f"{self.command[0]} failed: {reply}"
        if self.command[0] == "CONFIG":
            settings = _settings(reply)
            if settings.get("appendonly") == "yes" and settings.get("appendfsync") == "always":
                return None
            now = ", ".join(f"{k} {v}" for k, v in sorted(settings.items()))
            return (
                f"the server no longer fsyncs each write before it answers ({now}): run"
                " `CONFIG SET appendonly yes` and `CONFIG SET appendfsync always` on it (and set"
                " the same in its redis.conf)"
            )
        if self.command[0] == "WAIT":
            if isinstance(reply, int) and reply >= self.replicas:
                return None
            return (
                f"only {reply} of {self.replicas} replicas acknowledged the write within"
                f" {self.timeout:g} s (WAIT)"
            )
        if isinstance(reply, list) and len(reply) == 2 and int(reply[0]) >= 1:
            return None
        return f"the write was not fsynced within {self.timeout:g} s (WAITAOF answered {reply!r})"


def _settings(reply: object) -> dict[str, str]:
    """``CONFIG GET``'s reply (a flat list, or the mapping redis-py may make of it) as text."""
    if isinstance(reply, Mapping):
        pairs = list(reply.items())
    elif isinstance(reply, list):
        pairs = list(zip(reply[::2], reply[1::2], strict=False))
    else:
        return {}
    return {str(_text(k)): str(_text(v)) for k, v in pairs}


def strict_step(persistence: Persistence, replicas: int, timeout: float, where: str) -> StrictStep:
    """The strict mode's step on this server, or :class:`ConfigurationError` naming the fix."""
    ms = max(1, round(timeout * 1000))
    if replicas > 0:
        return StrictStep(
            ("WAIT", replicas, ms),
            replicas,
            timeout,
            f"each 2xx waits until {replicas} replica{'s' if replicas != 1 else ''} have the write"
            " (WAIT)",
        )
    p = persistence
    if p.appendonly == "yes" and p.appendfsync == "always":
        return StrictStep(
            ("CONFIG", "GET", "appendonly", "appendfsync"),
            0,
            timeout,
            "each write is fsynced before Redis answers it",
        )
    waitaof = p.version_tuple >= _WAITAOF_SINCE
    if p.appendonly == "yes" and waitaof:
        return StrictStep(
            ("WAITAOF", 1, 0, ms), 0, timeout, "each 2xx waits until the write is fsynced (WAITAOF)"
        )
    if p.refused is not None:
        raise ConfigurationError(_refused_without_config(p, where, waitaof))
    fixes = []
    if p.appendonly != "yes":
        fixes.append("CONFIG SET appendonly yes")
    if not waitaof:
        fixes.append("CONFIG SET appendfsync always")
    fix = " and ".join(f"`{f}`" for f in fixes)
    upgrade = "" if waitaof else ", or upgrade to Redis 7.2+, where WAITAOF waits for the fsync"
    raise ConfigurationError(
        f"durability='strict' needs Redis at {where} to write each put to disk before the"
        f" answer, and it runs Redis {p.version or 'of an unknown version'} with"
        f" {p.describe()}: run {fix} on it (and set the same in its redis.conf), or"
        f" pass replicas=N to wait for N replicas with WAIT{upgrade}"
    )


def refuse_cluster(persistence: Persistence, where: str) -> None:
    """:class:`ConfigurationError` for a server in cluster or Sentinel mode, naming what to use.

    The inbox's scripts touch several keys of one prefix, which a cluster spreads over its
    shards; a webhook inbox never needs a cluster's sharding (the service allows ten generations
    per ten minutes), so a cluster is refused rather than half supported."""
    if persistence.mode == "cluster":
        raise ConfigurationError(
            f"Redis at {where} runs in cluster mode, which the Redis backends do not support:"
            " their scripts touch several keys of one prefix, which a cluster spreads over its"
            " shards.  Use a standalone Redis (with replicas for failover; managed services call"
            " it 'cluster mode disabled' or a standard/basic tier)"
        )
    if persistence.mode == "sentinel":
        raise ConfigurationError(
            f"{where} is a Redis Sentinel, not a Redis server: give the URL of the primary it"
            " watches"
        )


def _refused_without_config(p: Persistence, where: str, waitaof: bool) -> str:
    """Strict mode refused on a server that will not say how it fsyncs (a managed Redis that
    refuses ``CONFIG``): only the fixes such a server allows."""
    if waitaof:  # 7.2+: the append-only file is off (INFO says so) or unknown
        disk = "turn on the append-only file in the server's settings (your provider's"
        disk += " persistence option), so that WAITAOF waits for the fsync"
    else:
        disk = "use Redis 7.2+ with the append-only file on, where WAITAOF waits for the fsync"
    return (
        f"durability='strict' needs Redis at {where} to confirm each put is on disk or on"
        f" replicas before the answer, and it runs Redis {p.version or 'of an unknown version'}"
        f" with {p.describe()}: a server that refuses CONFIG cannot be checked to fsync each"
        f" write, so pass replicas=N to wait for N replicas with WAIT (a managed service's"
        f" replicas), or {disk}; durability='relaxed' answers once Redis has the write"
    )


def start_line(persistence: Persistence, where: str, step: StrictStep | None) -> str:
    """The one line the inbox logs at start: the server, its persistence, what a crash loses;
    ``step`` in strict mode, ``None`` in relaxed mode."""
    p = persistence
    version = f"Redis {p.version}" if p.version else "Redis of an unknown version"
    head = f"Redis persistence at {where} ({version}): {p.describe()}: "
    if step is not None:
        return f"{head}durability='strict': {step.said}, so a host crash loses nothing acknowledged"
    return (
        f"{head}{crash_loss(p)}; durability='relaxed': a loss is found and logged by a receiver"
        " running across the Redis restart, at its next store or claim"
    )


def loss_line(lost: int, known: int, where: str, prefix: str) -> str:
    """The error a node logs when it finds the inbox's sequence below what it was answered."""
    return (
        f"Redis at {where} lost {lost} acknowledged deliver{'y' if lost == 1 else 'ies'} of the"
        f" inbox under {prefix!r} (its sequence of accepted entries went from {known} back to"
        f" {known - lost}): it restarted from a file that missed their writes, or failed over to"
        " a replica that had not received them.  Those not handled yet will not be (their"
        " senders were answered 2xx and will not send them again); those handled already lost"
        " their dedup keys, so a retry of one is handled again.  Each lost entry is counted"
        " once, by the first receiver whose mark finds it (with several receivers the count may"
        " be split among their lines); 'asyncsdk inbox stats' gives the total."
        "  durability='strict' answers only once a write is on disk or on replicas"
    )


def last_loss(reply: object) -> str | None:
    """The STATS script's ``"<ms> <from> <to>"`` as a sentence, or ``None``."""
    if not isinstance(reply, bytes | str):
        return None
    text = reply.decode() if isinstance(reply, bytes) else reply
    try:
        ms, known, now = (int(float(part)) for part in text.split())
    except ValueError:
        return None
    when = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return (
        f"last found {when.isoformat(timespec='seconds')}: the sequence of accepted entries"
        f" went from {known} back to {now}"
    )
