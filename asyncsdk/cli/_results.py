"""Where results go: names made only of cleaned parts, files only ever created, never replaced.

Everything in a result's name but the photo's stem comes from the service (the tool, the URL, the
image itself), so none of it is trusted: each part is cleaned to ``[A-Za-z0-9._-]``, the path is
checked to lie inside the output folder, and the file is made by a hard link from a fresh
temporary file, which neither follows a symlink nor replaces anything already there.  A name that
is taken gets a number (``kitchen--image-enhancement.2.jpg``) instead.

Results and the output folder get the user's umask, as any file a program writes (``0644`` and
``0755`` under the usual ``022``), so that a web server or a colleague can read what the user
chose to share; a stricter umask keeps them private.  What names orders and signed result URLs
(the ``process`` journal, ``receiver --out``) is opened with :func:`open_private`, ``0600``
whatever the umask.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Final

from yarl import URL

from asyncsdk import APIError, Client, ValidationError

__all__ = ["NOFOLLOW", "download", "make_folder", "open_private", "result_name"]

#: The formats the service returns, known by their first bytes; the first bytes decide the
#: extension, then the URL's, then ``.jpg``.
_SIGNATURES: Final = ((b"\xff\xd8\xff", ".jpg"), (b"\x89PNG\r\n\x1a\n", ".png"))
_SUFFIXES: Final = frozenset({".jpg", ".jpeg", ".png", ".webp"})
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_PART: Final = 100  # characters kept of each part: names stay well under the 255 bytes allowed
_TAKEN_TRIES: Final = 1000
#: open() refuses a symlink with this flag; Windows has none (and no symlinks for plain users).
NOFOLLOW: Final = 0 if sys.platform == "win32" else os.O_NOFOLLOW
#: Binary mode for os.open, which Windows needs and POSIX does not have.
if sys.platform == "win32":
    _BINARY: Final = os.O_BINARY
else:
    _BINARY: Final = 0
_PARTIAL_TRIES: Final = 100
#: What link() says on a file system without hard links (FAT, some network shares).
_NO_HARD_LINKS: Final = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK})


def _clean(text: str, fallback: str) -> str:
    """``text`` with anything but letters, digits, ``.``, ``_`` and ``-`` turned into ``-`` (so no
    ``/`` or ``\\`` survives), cut to a sane length; ``fallback`` when nothing is left."""
    return _UNSAFE.sub("-", text).strip("-")[:_MAX_PART].strip("-") or fallback


def result_name(photo_stem: str, tool: str, index: int, count: int, widgets: str = "") -> str:
    """The file stem of a result: ``kitchen--image-enhancement``, with the widgets' digest when
    given (``kitchen--virtual-staging-1a2b3c4d``) and ``-2``... when a process made several.

    Every part is cleaned, the tool's name too: it comes from the service.
    """
    stem = _clean(photo_stem, "photo")
    short = _clean(tool.removeprefix("tool-"), "result")
    digest = f"-{_clean(widgets, '')}" if widgets else ""
    suffix = f"-{index + 1}" if count > 1 else ""
    return f"{stem}--{short}{digest}{suffix}"


def make_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) with the user's umask; an existing one is kept."""
    folder.mkdir(parents=True, exist_ok=True)


def _extension(head: bytes, url: URL) -> str:
    for signature, extension in _SIGNATURES:
        if head.startswith(signature):
            return extension
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return ".webp"
    from_path = Path(url.path).suffix.lower()
    return from_path if from_path in _SUFFIXES else ".jpg"


def _inside(folder: Path, name: str) -> Path:
    """``folder/name``, checked to be a direct child of ``folder`` once resolved."""
    target = folder / name
    if target.parent.resolve() != folder.resolve() or Path(name).name != name:
        raise APIError(f"refusing to write the result {name!r} outside {folder}")
    return target


def open_private(path: Path, flags: int = os.O_WRONLY) -> int:
    """Open ``path`` for writing, creating it ``0600`` when missing and refusing a symlink there;
    ``flags`` add ``O_APPEND``, or ``O_EXCL`` to take a name only if it is free."""
    return os.open(path, flags | os.O_CREAT | NOFOLLOW, 0o600)


def _sync_folder(folder: Path) -> None:
    """Push the folder's entries (a new name) to disk (where a folder can be opened: not on
    Windows)."""
    if sys.platform == "win32":
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _claim(partial: Path, target: Path) -> bool:
    """Give the finished ``partial`` the name ``target`` unless something has that name."""
    try:
        os.link(partial, target, follow_symlinks=False)
        return True
    except FileExistsError:
        return False  # a file, a symlink or a folder of that name: never replaced
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    # A file system without hard links: take the name with O_EXCL, then move the file over the
    # empty one just made (a rename replaces a symlink swapped in meanwhile, never follows it).
    try:
        os.close(open_private(target, os.O_WRONLY | os.O_EXCL))
    except FileExistsError:
        return False
    os.replace(partial, target)
    return True


def _place(partial: Path, folder: Path, stem: str, extension: str) -> Path:
    """Name the finished ``partial`` with the first free name ``stem[.N]extension``."""
    for number in range(1, _TAKEN_TRIES + 1):
        numbered = stem if number == 1 else f"{stem}.{number}"
        target = _inside(folder, numbered + extension)
        if _claim(partial, target):
            return target
    raise APIError(f"{_TAKEN_TRIES} results named {stem}{extension} already exist in {folder}")


def _new_partial(folder: Path, stem: str) -> tuple[int, Path]:
    """A new temporary file ``.stem.<random>.part`` in ``folder``, open for reading and writing:
    made with ``O_EXCL`` (never an existing file, never through a symlink) and mode ``0666``
    less the umask, which the result keeps."""
    for _ in range(_PARTIAL_TRIES):
        partial = folder / f".{stem}.{secrets.token_hex(8)}.part"
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | NOFOLLOW | _BINARY
        try:
            return os.open(partial, flags, 0o666), partial
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {stem} in {folder}")


async def download(client: Client, url: str, folder: Path, stem: str) -> Path:
    """Stream the result at ``url`` into ``folder/stem.<ext>`` and return the file's path.

    The download is :meth:`asyncsdk.Client.download` (http(s) only, no API key sent), written
    to a temporary file created with ``O_EXCL`` beside the target (with the user's umask, the
    result's mode); the result appears under its name only when complete, and a failure leaves
    nothing behind.
    """
    _inside(folder, stem)  # a stem made by result_name always is; anything else is refused
    make_folder(folder)
    handle, partial = _new_partial(folder, stem)
    try:
        with os.fdopen(handle, "w+b") as file:
            try:
                await client.download(url, file)
            except ValidationError as exc:
                # The URL came from the service, so this is the service's fault, not the caller's.
                raise APIError(f"the service gave a result URL that is not fetched: {exc}") from exc
            file.seek(0)
            head = file.read(12)
            # On disk before it takes its name, and the journal says "done": a result that a
            # power loss leaves empty would be taken for a finished one.
            os.fsync(file.fileno())
        placed = _place(partial, folder, stem, _extension(head, URL(url)))
        _sync_folder(folder)
        return placed
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
