"""The API reference lists every public method a user calls, each with its docstring.

"Public" is every class of ``asyncsdk.__all__`` and ``webhooks.__all__`` and every object a
client hands out as an attribute (``client.processes``, ``client.orders``, ...); its methods are
the names without a leading underscore that the two packages define, inherited ones included.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType

import pytest

import asyncsdk
import webhooks
import webhooks.contract

PACKAGES: tuple[ModuleType, ...] = (asyncsdk, webhooks)
#: The modules whose ``__all__`` is public: the packages and what a backend author imports.
MODULES: tuple[ModuleType, ...] = (*PACKAGES, webhooks.contract)


def ours(cls: type) -> bool:
    return cls.__module__.partition(".")[0] in {"asyncsdk", "webhooks"}


def public_classes() -> dict[type, str]:
    """Each exported class by the path the reference documents it under (``asyncsdk.Client``)."""
    found: dict[type, str] = {}
    for module in MODULES:
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type):
                found[value] = f"{module.__name__}.{name}"
    return found


PUBLIC = public_classes()


async def client_attributes() -> dict[str, type]:
    """The classes of what a client offers as attributes: ``client.processes`` and the rest."""
    async with asyncsdk.Client(api_key="sk_reference", base_url="http://127.0.0.1:9") as client:
        return {
            name: type(value)
            for name, value in vars(client).items()
            if not name.startswith("_") and ours(type(value))
        }


def own_doc(cls: type, name: str) -> str:
    """The docstring ``cls`` itself gives ``name`` (a method, class method or property)."""
    member = vars(cls)[name]
    if isinstance(member, property):
        member = member.fget
    return (getattr(member, "__func__", member).__doc__ or "").strip()


def public_methods(cls: type) -> list[str]:
    return [
        attr.name
        for attr in inspect.classify_class_attrs(cls)
        if not attr.name.startswith("_") and attr.kind != "data" and ours(attr.defining_class)
    ]


def documented_by(cls: type, name: str) -> list[type]:
    """The classes of ``cls``'s own packages, itself first, that give ``name`` a docstring."""
    return [c for c in cls.__mro__ if ours(c) and name in vars(c) and own_doc(c, name)]


@pytest.fixture(scope="module")
def reference(site: Path) -> dict[str, str]:
    """The two reference pages of the site."""
    return {
        package.__name__: (site / "reference" / package.__name__ / "index.html").read_text("utf-8")
        for package in PACKAGES
    }


async def test_what_a_client_hands_out_is_documented_under_a_public_name() -> None:
    attributes = await client_attributes()
    assert {"processes", "orders", "projects", "tools", "catalogue", "v1"} <= set(attributes)
    for name, cls in attributes.items():
        assert cls in PUBLIC, (
            f"client.{name} is a {cls.__qualname__}, which asyncsdk does not export"
        )


def test_every_public_method_has_a_docstring() -> None:
    undocumented = [
        f"{path}.{name}"
        for cls, path in PUBLIC.items()
        for name in public_methods(cls)
        if not documented_by(cls, name)
    ]
    assert undocumented == []


def test_every_public_method_is_in_the_built_reference(reference: dict[str, str]) -> None:
    missing = []
    for cls, path in PUBLIC.items():
        for name in public_methods(cls):
            # An inherited member counts where a public class documents it: the reference shows
            # it there, and the class's "Bases:" links to it.  A private base's members must be
            # rendered on the class itself (WebhookReceiver.from_redis).
            homes = [cls, *(c for c in documented_by(cls, name) if c in PUBLIC)]
            pages = {PUBLIC[c]: reference[PUBLIC[c].partition(".")[0]] for c in homes}
            if not any(f'id="{home}.{name}"' in page for home, page in pages.items()):
                missing.append(f"{path}.{name}")
    assert missing == []


def test_the_resources_and_the_receivers_setups_are_listed(reference: dict[str, str]) -> None:
    page = reference["asyncsdk"]
    for method in ("create", "get", "wait", "prepare"):
        assert f'id="asyncsdk.Processes.{method}"' in page
    for method in ("create", "get", "append_mask"):
        assert f'id="asyncsdk.Orders.{method}"' in page
    for attribute in ("processes", "orders", "projects", "tools", "catalogue", "v1"):
        assert f'id="asyncsdk.Client.{attribute}"' in page
    receiver = reference["webhooks"]
    for method in ("from_redis", "from_postgres", "from_backend"):
        assert f'id="webhooks.WebhookReceiver.{method}"' in receiver
        assert f'id="webhooks.EventReceiver.{method}"' in receiver
    # No private base shown as the receiver's "Bases:", a name that leads nowhere.
    assert "OneCallSetup" not in receiver


def test_run_says_where_its_forwarded_arguments_are_documented(
    reference: dict[str, str],
) -> None:
    page = reference["asyncsdk"]
    for method, after in (
        ("Client.run", "Client.run_mask_removal"),
        ("Client.run_mask_removal", "ClientSettings"),
    ):
        start = page.index(f'id="asyncsdk.{method}"')
        section = page[start : page.index(f'id="asyncsdk.{after}"', start + 1)]
        assert 'href="#asyncsdk.Processes.wait"' in section, method
    # and that anchor exists: the link resolves
    assert 'id="asyncsdk.Processes.wait"' in page
