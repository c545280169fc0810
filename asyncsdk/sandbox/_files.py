"""Image files of the sandbox on disk: uploads streamed in, results written, variants cached.

Everything lives in one temporary folder that is removed when the sandbox stops.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

import attrs

from asyncsdk.sandbox._records import StoredFile

__all__ = ["FileStore"]

EXTENSIONS = {"jpeg": "jpg", "png": "png", "webp": "webp"}


@attrs.define
class FileStore:
    """Files by id under ``root``; ``variant_path`` names a cached resized copy."""

    root: Path
    files: dict[str, StoredFile] = attrs.Factory(dict)

    @classmethod
    def create(cls) -> FileStore:
        return cls(Path(tempfile.mkdtemp(prefix="asyncsdk-sandbox-")))

    def new_id(self) -> str:
        return secrets.token_hex(12)

    def spool_path(self, file_id: str) -> Path:
        return self.root / f"{file_id}.part"

    def open_spool(self, file_id: str) -> BinaryIO:
        return self.spool_path(file_id).open("wb")

    def discard_spool(self, file_id: str) -> None:
        self.spool_path(file_id).unlink(missing_ok=True)

    def keep(self, file_id: str, fmt: str, width: int, height: int, name: str) -> StoredFile:
        """Turn a finished spool file into a stored file."""
        stored = StoredFile(id=file_id, name=name, format=fmt, width=width, height=height)
        self.spool_path(file_id).rename(self.path(stored))
        self.files[file_id] = stored
        return stored

    def register(self, stored: StoredFile) -> StoredFile:
        self.files[stored.id] = stored
        return stored

    def path(self, stored: StoredFile) -> Path:
        return self.root / f"{stored.id}.{EXTENSIONS[stored.format]}"

    def variant_path(self, stored: StoredFile, label: str) -> Path:
        return self.root / f"{stored.id}-{label}.{EXTENSIONS[stored.format]}"

    def remove_all(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.files.clear()
