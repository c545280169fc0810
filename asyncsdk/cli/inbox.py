"""``asyncsdk inbox stats|dead|replay|purge``: a receiver inbox, as an operator sees it.

The inbox is named by one option per durable store of :data:`webhooks.stores.STORES`
(``--redis URL`` with ``--prefix``, ``--sqlite PATH``...); every receiver sharing it sees the
same depth and dead letters.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

import attrs

from asyncsdk import ConfigurationError
from asyncsdk.cli._exits import EXIT_FAILED, EXIT_OK, UsageError
from asyncsdk.cli._store_options import NamedStore, add_store_options, named_store, one_of
from asyncsdk.cli._tables import format_table
from webhooks import (
    InboxEntry,
    InboxError,
    InboxUnavailableError,
    UnknownEntryError,
    describe_event,
)
from webhooks.contract import InspectableInbox
from webhooks.stores import STORES, Store

__all__ = ["add_parser"]

NAMED: tuple[Store[Any], ...] = tuple(store for store in STORES if store.durable)
"""The stores an operator can name from another process: those whose entries outlive it."""

DESCRIPTION = f"""\
Look into a webhook receiver's inbox and deal with its dead letters (events whose handlers failed
max_attempts times):

  stats            unfinished events, the age of the oldest, dead letters, replays so far; for
                   Redis, what a crash of its host can lose (its persistence settings) and the
                   acknowledged events it was found to have lost
  dead             list the dead letters, oldest first (their ids, events and last errors)
  replay ID...     hand dead letters to the receivers again (attempts start over; no second
                   dedup claim: the event is handled once more, once); counted in the store
  purge ID...      drop dead letters for good (the sender's retries stay duplicates)

Name the inbox the receivers use:
  {one_of(NAMED)}
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = argparse.ArgumentParser(add_help=False)
    add_store_options(
        store, NAMED, required=True, title="the inbox (one of)", plain_namespaces=True
    )
    parser = subparsers.add_parser(
        "inbox",
        help="inspect a receiver inbox; replay or purge dead letters",
        description=DESCRIPTION,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    stats = actions.add_parser(
        "stats", parents=[store], help="depth, oldest age, dead letters, replays"
    )
    stats.add_argument("--json", action="store_true", help="one JSON object")
    stats.set_defaults(handler=_stats)
    dead = actions.add_parser("dead", parents=[store], help="list dead letters")
    dead.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    dead.add_argument("--json", action="store_true", help="one JSON object per line")
    dead.set_defaults(handler=_dead)
    for name, what, handler in (
        ("replay", "hand dead letters to the receivers again", _replay),
        ("purge", "drop dead letters for good", _purge),
    ):
        action = actions.add_parser(name, parents=[store], help=what)
        action.add_argument("ids", nargs="*", metavar="ID", help="dead letter ids (see: dead)")
        action.add_argument("--all", action="store_true", help="every dead letter")
        action.set_defaults(handler=handler)
    for sub in actions.choices.values():
        sub.formatter_class = argparse.RawDescriptionHelpFormatter


def _named(args: argparse.Namespace) -> NamedStore:
    named = named_store(args, NAMED)
    if named is None:  # argparse requires one of the options
        raise UsageError("name the inbox: " + one_of(NAMED))
    return named


async def _check_place(named: NamedStore, inbox: InspectableInbox) -> None:
    """Refuse a place without an inbox where opening one would create it (a PostgreSQL schema, a
    SQLite file), and warn about one with nothing stored yet where it appears only with the
    first delivery (a Redis prefix): both are most often an option other than the receivers'.
    ``inbox`` names the store in errors (its repr shows no password)."""
    store = named.store
    try:
        found = await store.exists(inbox)
    except InboxUnavailableError as exc:
        raise ConnectionError(f"{inbox!r} cannot be reached: {exc}") from exc
    except (InboxError, ConfigurationError) as exc:  # the DSN's query, a refused login
        raise UsageError(f"{inbox!r}: {exc}; fix the --{store.name} {store.place}") from exc
    if found:
        return
    if store.empty_until_first_delivery:
        sys.stderr.write(
            f"warning: nothing is stored under the {store.namespace} {named.namespace!r} at that"
            f" {store.title} (a receiver's inbox appears with its first delivery); is it the"
            f" {store.namespace} the receivers use?\n"
        )
    elif store.namespace:
        raise UsageError(
            f"no inbox in the {store.namespace} {named.namespace!r} of that {store.title}; pass"
            f" the --{store.namespace} the receivers use (they create it when they start)"
        )
    else:
        raise UsageError(
            f"no {store.title} inbox at {named.place}; pass the --{store.name} {store.place}"
            " the receivers use"
        )


async def _with_inbox(args: argparse.Namespace, action: Any) -> int:
    named = _named(args)
    # Checks the options and that the store's extra is installed.
    inbox = named.store.open_inbox(named.place, named.namespace)
    try:
        await _check_place(named, inbox)
        code: int = await action(inbox)
    except InboxUnavailableError as exc:
        raise ConnectionError(f"the inbox cannot be reached: {exc}") from exc
    finally:
        await inbox.close()
    return code


async def _stats(args: argparse.Namespace) -> int:
    async def show(inbox: InspectableInbox) -> int:
        stats = await inbox.stats()
        if args.json:
            print(json.dumps(attrs.asdict(stats)))
        else:
            age = "-" if stats.oldest_age is None else f"{stats.oldest_age:.1f} s"
            print(f"unfinished  {stats.depth}\noldest      {age}\ndead        {stats.dead}")
            print(f"replayed    {stats.replayed}")
            if stats.durability is not None:
                print(f"durability  {stats.durability}")
            if stats.durability is not None or stats.lost:
                last = f" ({stats.last_loss})" if stats.last_loss else ""
                print(f"lost        {stats.lost} acknowledged{last}")
        return EXIT_OK

    return await _with_inbox(args, show)


_NOT_IN_TABLE = frozenset(("tool", "attempts", "received_at", "last_error"))


def _row(entry: InboxEntry) -> dict[str, Any]:
    received = datetime.datetime.fromtimestamp(entry.received_at, datetime.UTC)
    return {
        "id": entry.id,
        **describe_event(entry.event),
        "attempts": entry.attempts,
        "received_at": received.isoformat(timespec="seconds"),
        "last_error": entry.last_error,
    }


async def _dead(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be 1 or more, not {args.limit}")

    async def show(inbox: InspectableInbox) -> int:
        rows = [_row(entry) for entry in await inbox.dead_letters(args.limit)]
        if args.json:
            for row in rows:
                print(json.dumps(row))
        elif rows:
            # process_id and status for the service's events, message_id and type for others'.
            named = dict.fromkeys(k for row in rows for k in row if k not in _NOT_IN_TABLE)
            headers = (*named, "attempts", "received_at", "last_error")
            print(format_table(headers, ([row.get(h) or "" for h in headers] for row in rows)))
        else:
            print("no dead letters")
        return EXIT_OK

    return await _with_inbox(args, show)


async def _each_dead(args: argparse.Namespace, verb: str, done: str, act: Any) -> int:
    if bool(args.ids) == bool(args.all):
        raise UsageError(
            f"name the dead letters to {verb} (ids from 'asyncsdk inbox dead') or pass --all"
        )

    async def run(inbox: InspectableInbox) -> int:
        ids = args.ids or [entry.id for entry in await inbox.dead_letters(1_000_000)]
        missing = 0
        for entry_id in ids:
            try:
                await act(inbox, entry_id)
            except UnknownEntryError:
                missing += 1
                sys.stderr.write(
                    f"error: no dead letter with id {entry_id!r}; 'asyncsdk inbox dead' lists "
                    "them, with the same store options\n"
                )
            else:
                print(f"{done} {entry_id}")
        return EXIT_FAILED if missing else EXIT_OK

    return await _with_inbox(args, run)


async def _replay(args: argparse.Namespace) -> int:
    return await _each_dead(
        args, "replay", "replayed", lambda inbox, entry_id: inbox.replay(entry_id)
    )


async def _purge(args: argparse.Namespace) -> int:
    return await _each_dead(args, "purge", "purged", lambda inbox, entry_id: inbox.purge(entry_id))
