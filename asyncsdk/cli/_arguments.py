"""What a command reads from its options and the environment: the service's key and address,
widgets given as ``NAME=VALUE``, and durations."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence

from asyncsdk.cli._exits import UsageError

__all__ = ["parse_widgets", "positive_seconds", "service_settings"]


def service_settings(
    environ: Mapping[str, str], base_url: str | None, app_url: str | None
) -> tuple[str, str, str | None]:
    """The API key, base URL and catalogue URL from the options and the environment."""
    key = environ.get("ASYNCSDK_API_KEY", "").strip()
    if not key:
        raise UsageError(
            "no API key: set ASYNCSDK_API_KEY (and ASYNCSDK_BASE_URL), or add --sandbox to try "
            "against the built-in emulator"
        )
    base = base_url or environ.get("ASYNCSDK_BASE_URL", "").strip()
    if not base:
        raise UsageError(
            "no service address: set ASYNCSDK_BASE_URL or pass --base-url, or add --sandbox"
        )
    app = app_url or environ.get("ASYNCSDK_APP_URL", "").strip() or None
    return key, base, app


def parse_widgets(options: Sequence[str]) -> dict[str, str | list[str]]:
    """``["space=bedroom", "options=a", "options=b"]`` -> ``{"space": "bedroom", "options":
    ["a", "b"]}``: a name given twice becomes a list (multi-select widgets)."""
    widgets: dict[str, str | list[str]] = {}
    for option in options:
        name, sep, value = option.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise UsageError(
                f"--widget takes NAME=VALUE, e.g. --widget space=bedroom, not {option!r}"
            )
        values = [v.strip() for v in value.split(",") if v.strip()]
        previous = widgets.get(name)
        if previous is None:
            widgets[name] = values[0] if len(values) == 1 else values
        else:
            widgets[name] = [*([previous] if isinstance(previous, str) else previous), *values]
    return widgets


def positive_seconds(text: str) -> float:
    """An option's value as seconds: a finite number above 0 (argparse names the option when
    this refuses it)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(
            f"takes a number of seconds above 0, e.g. 0.5, not {text!r}"
        )
    return seconds
