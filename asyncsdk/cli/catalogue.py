"""``asyncsdk tools`` and ``asyncsdk widgets TOOL``: browse the tool catalogue."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any, Final

import attrs

from asyncsdk import Catalogue, Client
from asyncsdk.cli._arguments import service_settings
from asyncsdk.cli._tables import format_table
from asyncsdk.sandbox import SandboxConfig

__all__ = ["add_parsers"]

#: The tool list needs no API key (spec 4.10), but a client is built with one; this stands in
#: when none is set.  It is sent with no request: the catalogue request is unauthenticated.
_NO_KEY: Final = "no-key-needed-for-the-tool-list"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--base-url", help="the service address (default: $ASYNCSDK_BASE_URL)")
    parser.add_argument("--app-url", help="the catalogue host (default: $ASYNCSDK_APP_URL)")
    parser.add_argument(
        "--sandbox", action="store_true", help="ask the built-in emulator's catalogue instead"
    )


def add_parsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = subparsers.add_parser(
        "tools",
        help="list the tools of the catalogue",
        description="List the service's tools: slug, name and whether it is active.",
    )
    _common(tools)
    tools.set_defaults(handler=run_tools)
    widgets = subparsers.add_parser(
        "widgets",
        help="list the widgets (settings) of a tool and their values",
        description="List the widgets of TOOL and the values each takes, as `process --widget` "
        "accepts them (NAME=VALUE).  In --json, `handle` is that NAME and `values` its values.",
    )
    widgets.add_argument("tool", help="tool slug or name, e.g. tool-virtual-staging")
    _common(widgets)
    widgets.set_defaults(handler=run_widgets)


@contextlib.asynccontextmanager
async def _client(args: argparse.Namespace, *, key_needed: bool) -> AsyncIterator[Client]:
    if args.sandbox:
        from asyncsdk.sandbox import Sandbox  # needs Pillow; without it, one line names the extra

        async with (
            Sandbox(SandboxConfig()) as sandbox,
            Client(
                api_key=sandbox.api_key, base_url=sandbox.base_url, app_url=sandbox.app_url
            ) as client,
        ):
            yield client
        return
    environ = dict(os.environ)
    if not key_needed and not environ.get("ASYNCSDK_API_KEY", "").strip():
        environ["ASYNCSDK_API_KEY"] = _NO_KEY
    key, base, app = service_settings(environ, args.base_url, args.app_url)
    async with Client(api_key=key, base_url=base, app_url=app) as client:
        yield client


def _dump(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


async def run_tools(args: argparse.Namespace) -> int:
    async with _client(args, key_needed=False) as client:
        tools = await client.tools.list()
    if args.json:
        _dump([attrs.asdict(tool) for tool in tools])
        return 0
    rows = [[tool.slug, tool.name, "yes" if tool.is_active else "no"] for tool in tools]
    print(format_table(["slug", "name", "active"], rows))
    return 0


async def run_widgets(args: argparse.Namespace) -> int:
    async with _client(args, key_needed=True) as client:
        listed = Catalogue(tools=await client.tools.list()).tool(args.tool)
        widgets = await client.tools.widgets(listed.slug)
    catalogue = Catalogue(tools=(listed,), widgets={listed.slug: widgets})
    tool = listed.slug
    if args.json:
        _dump(
            {
                "tool": tool,
                "widgets": [
                    {
                        **attrs.asdict(widget),
                        "handle": catalogue.handle(tool, widget),
                        "values": list(catalogue.values(tool, widget)),
                        "required": not widget.is_optional,
                        "multiple": catalogue.is_multi_select(widget),
                    }
                    for widget in widgets
                ],
            }
        )
        return 0
    if not widgets:
        print(f"{tool} takes no widgets")
        return 0
    rows = []
    for widget in widgets:
        if not widget.is_active:
            continue
        active = [item for item in widget.items if item.is_active]
        values = [
            f"{value}*" if item.is_default else value
            for item, value in zip(active, catalogue.values(tool, widget), strict=True)
        ]
        rows.append(
            [
                catalogue.handle(tool, widget),
                "yes" if not widget.is_optional else "no",
                "several" if catalogue.is_multi_select(widget) else "one",
                ", ".join(values),
            ]
        )
    print(format_table(["widget", "required", "takes", "values (* default)"], rows))
    example = " ".join(
        f"--widget {row[0]}={row[3].split(', ')[0].rstrip('*')}" for row in rows if row[1] == "yes"
    )
    if example:
        print(f"\ne.g. asyncsdk process {tool} PHOTO {example}")
    return 0
