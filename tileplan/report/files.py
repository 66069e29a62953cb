"""Writing outputs: whole or not at all (temp file + rename), with the user's umask."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tileplan.errors import TileplanError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder, then rename. The file gets
    the permissions a plain ``open(path, "w")`` would give (0666 less the umask)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise TileplanError(f"cannot write {target}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    except OSError as err:
        raise TileplanError(f"cannot write {target}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise TileplanError(f"cannot write {target}: {err.strerror}") from None


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode())
