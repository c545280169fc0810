"""A Griffe extension for the docs build: the reStructuredText markup of the docstrings as Markdown.

The docstrings are written for ``help()`` and editors, in reST: ``:class:`~asyncsdk.Timeout``` roles
and paragraphs ending in ``::`` before an indented example.  mkdocstrings renders Markdown, where
both would show as typed.  This turns a role naming a public name (``asyncsdk.X`` or
``webhooks.X``, ``X`` in the package's ``__all__``, or a member of it) into a link to its entry in
the reference, any other role into code, and ``::`` into ``:``.  Loaded by ``mkdocs.yml``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

import asyncsdk
import webhooks

PUBLIC = {"asyncsdk": set(asyncsdk.__all__), "webhooks": set(webhooks.__all__)}
ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`(~?)([\w.]+)`")
LITERAL_MARKER = re.compile(r"(\S)::$|^\s*::$", re.M)


def _public(target: str) -> bool:
    parts = target.split(".")
    return len(parts) >= 2 and parts[1] in PUBLIC.get(parts[0], set())


def _role(found: re.Match[str]) -> str:
    short, target = found.groups()
    title = target.rsplit(".", 1)[-1] if short else target
    if _public(target):
        return f"[`{title}`][{target}]"
    return f"`{title}`"


def markdown(text: str) -> str:
    """``text`` with its reST roles and literal-block markers in Markdown."""
    text = ROLE.sub(_role, text)
    return LITERAL_MARKER.sub(lambda m: f"{m.group(1)}:" if m.group(1) else "", text)


class RstMarkup(griffe.Extension):
    """Rewrites each docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
