"""What the subcommands share: exit codes, option parsing, tables and result downloads."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

import aiohttp
from yarl import URL

from asyncsdk._downloads import DOWNLOAD_CHUNK, check_result_url
from asyncsdk._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AsyncSDKError,
    ConfigurationError,
    ProcessFailedError,
    ValidationError,
    WaitTimeoutError,
    status_error_class,
)

__all__ = [
    "EXIT_API",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "download",
    "exit_code_for",
    "format_table",
    "parse_widgets",
    "result_name",
    "service_settings",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_API: Final = 3
EXIT_INTERRUPTED: Final = 130

_CONTENT_TYPES: Final = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp"}
_SUFFIXES: Final = frozenset({".jpg", ".jpeg", ".png", ".webp"})


class UsageError(ConfigurationError):
    """The command line asks for something impossible (a missing file, a bad option value)."""


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code of an error that ends a command; ``None`` for errors that are defects."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, APIError | OSError):
        return EXIT_API
    if isinstance(exc, ProcessFailedError | WaitTimeoutError):
        return EXIT_FAILED
    if isinstance(exc, AsyncSDKError):
        return EXIT_USAGE
    return None


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


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, with a rule under the header."""
    text_rows = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in text_rows)
    return "\n".join(out)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def result_name(photo_stem: str, tool: str, index: int, count: int, widgets: str = "") -> str:
    """The file stem of a result: ``kitchen--image-enhancement``, with the widgets' digest when
    given (``kitchen--virtual-staging-1a2b3c4d``) and ``-2``... when a process made several."""
    stem = _UNSAFE.sub("-", photo_stem).strip("-") or "photo"
    short = tool.removeprefix("tool-")
    digest = f"-{widgets}" if widgets else ""
    suffix = f"-{index + 1}" if count > 1 else ""
    return f"{stem}--{short}{digest}{suffix}"


def _suffix_for(content_type: str, url: URL) -> str:
    suffix = _CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if suffix:
        return suffix
    from_path = Path(url.path).suffix.lower()
    return from_path if from_path in _SUFFIXES else ".jpg"


async def download(session: aiohttp.ClientSession, url: str, folder: Path, stem: str) -> Path:
    """Stream the file at ``url`` into ``folder/stem.<ext>`` and return its path.

    Only ``http``/``https`` URLs are fetched.  Result URLs are opaque and may point at another host
    than the API, so no API key is sent.  The file is written under a temporary name and renamed
    when complete, so a partial file never looks like a result.
    """
    try:
        parsed = check_result_url(url)
    except ValidationError as exc:
        # The URL came from the service, so this is the service's fault, not the caller's.
        raise APIError(f"the service gave a result URL that is not fetched: {exc}") from exc
    partial = _partial_path(folder, stem)
    try:
        async with session.get(parsed) as response:
            if response.status >= 400:
                cls = status_error_class(response.status)
                raise cls(
                    f"downloading a result failed with HTTP {response.status}",
                    status=response.status,
                    method="GET",
                    url=str(parsed.with_query(None)),
                )
            target = folder / (stem + _suffix_for(response.content_type, parsed))
            with partial.open("wb") as file:
                async for chunk in response.content.iter_chunked(DOWNLOAD_CHUNK):
                    file.write(chunk)
    except TimeoutError as exc:
        partial.unlink(missing_ok=True)
        raise APITimeoutError(
            f"downloading {stem} timed out", method="GET", url=str(parsed.with_query(None))
        ) from exc
    except aiohttp.ClientError as exc:
        partial.unlink(missing_ok=True)
        raise APIConnectionError(
            f"downloading {stem} failed: {exc}", method="GET", url=str(parsed.with_query(None))
        ) from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return target


def _partial_path(folder: Path, stem: str) -> Path:
    """Where a download is written until it is complete (the folder is created)."""
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f".{stem}.part"
