"""Writing outputs: whole or not at all (temp file + rename), with the user's umask; and checking,
before a long computation, that an output can be written at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tileplan.errors import TileplanError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _probe(folder: Path, target: Path) -> None:
    """Create and delete a file in ``folder``: the only reliable test that we may write there."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise TileplanError(f"cannot write {target}: {err.strerror or err} in folder {folder}") from None


def _existing_ancestor(path: Path) -> Path:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def check_output_file(path: str | Path) -> Path:
    """Raise ``TileplanError`` unless a file can be written at ``path`` (an existing file is replaced).

    Call it before a long search so that a typo in an output path fails in a second, not after it.
    """
    target = Path(path)
    if target.is_dir():
        raise TileplanError(f"cannot write {target}: it is a folder; give a file name")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.exists():
        above = _existing_ancestor(folder)
        if above.is_dir():
            raise TileplanError(f"cannot write {target}: folder {folder} does not exist")
        raise TileplanError(f"cannot write {target}: {above} is a file, not a folder")
    if not folder.is_dir():
        raise TileplanError(f"cannot write {target}: {folder} is a file, not a folder")
    _probe(folder, target)
    return target


def check_output_folder(path: str | Path) -> Path:
    """Raise ``TileplanError`` unless ``path`` is, or can be created as, a writable folder."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise TileplanError(f"cannot write into {folder}: it is a file, not a folder")
    above = _existing_ancestor(folder)
    if not above.is_dir():
        raise TileplanError(f"cannot create folder {folder}: {above} is a file, not a folder")
    _probe(above, folder)
    return folder


def make_output_folder(path: str | Path) -> Path:
    """Create the folder ``path`` (and its parents) after :func:`check_output_folder`."""
    folder = check_output_folder(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TileplanError(f"cannot create folder {folder}: {err.strerror or err}") from None
    return folder


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder, then rename. The file gets
    the permissions a plain ``open(path, "w")`` would give (0666 less the umask). Interrupted or
    failed, it leaves neither a partial file nor the temporary one."""
    target = check_output_file(path)
    folder = target.parent if str(target.parent) else Path(".")
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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode())
