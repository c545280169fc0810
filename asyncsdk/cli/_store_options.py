"""The command line's options naming a store (``--redis URL --redis-prefix P``...), one per row
of :data:`webhooks.stores.STORES`, and the store, place and namespace they name."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any

import attrs

from webhooks.stores import Store

__all__ = ["NamedStore", "add_store_options", "named_store", "one_of"]


@attrs.frozen
class NamedStore:
    """The store the options name, its place (URL, DSN or path) and namespace."""

    store: Store[Any]
    place: str
    namespace: str


def one_of(stores: Sequence[Store[Any]], *, plain_namespaces: bool = True) -> str:
    """``--sqlite PATH, --redis URL [--prefix P] or --postgres DSN [--schema S]`` (without
    ``plain_namespaces``: ``[--redis-prefix P]``), as :func:`add_store_options` names them."""
    names = []
    for store in stores:
        if not store.place:
            continue
        name = f"--{store.name} {store.place}"
        if store.namespace:
            flag = store.namespace if plain_namespaces else f"{store.name}-{store.namespace}"
            name += f" [--{flag} {store.namespace[0].upper()}]"
        names.append(name)
    return textwrap.fill(", ".join(names[:-1]) + " or " + names[-1], width=99)


def add_store_options(
    parser: argparse.ArgumentParser,
    stores: Sequence[Store[Any]],
    *,
    required: bool,
    title: str,
    plain_namespaces: bool,
) -> None:
    """One option per store that has a place (``--redis URL``), mutually exclusive, and one per
    namespace: ``--redis-prefix`` and, with ``plain_namespaces``, ``--prefix`` too (a command
    whose ``--prefix`` means something else passes ``False``)."""
    group = parser.add_argument_group(title).add_mutually_exclusive_group(required=required)
    for store in stores:
        if store.place:
            group.add_argument(
                f"--{store.name}",
                metavar=store.place,
                help=f"a {store.title} inbox, e.g. {store.example}",
            )
    namespaces: dict[str, list[Store[Any]]] = {}
    for store in stores:
        if store.namespace:
            namespaces.setdefault(store.namespace, []).append(store)
    for namespace, owners in namespaces.items():
        flags = [f"--{namespace}"] if plain_namespaces else []
        flags += [f"--{store.name}-{namespace}" for store in owners]
        defaults = ", ".join(f"{store.title} {store.default_namespace!r}" for store in owners)
        parser.add_argument(
            *flags, dest=_dest(namespace), help=f"the inbox's {namespace} (default {defaults})"
        )


def _dest(namespace: str) -> str:
    """Where argparse keeps a namespace option: apart from the command's own options (the
    receiver's ``--prefix`` is its URL path)."""
    return f"store_{namespace}"


def named_store(args: argparse.Namespace, stores: Sequence[Store[Any]]) -> NamedStore | None:
    """The store the parsed options name (the namespace's default when none is given), or
    ``None`` when they name none."""
    given = vars(args)  # one entry per option, named for it
    for store in stores:
        if store.place and given[store.name] is not None:
            namespace = given[_dest(store.namespace)] if store.namespace else None
            return NamedStore(store, str(given[store.name]), namespace or store.default_namespace)
    return None
