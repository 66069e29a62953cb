"""Writing outputs: whole or not at all (temp file + rename), with the user's umask; and checking,
before a long computation, that an output can be written at all, that it is none of the command's
inputs nor another of its outputs. A character device, FIFO or socket (``/dev/null``, ``/dev/stdout``,
a named pipe) is written to, never replaced. Input files are read with a size cap."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tileplan.errors import TileplanError

#: Largest text input (accelerator YAML/JSON, mapping or plan JSON, measurements CSV) read, in bytes.
MAX_TEXT_INPUT_BYTES = 64 * 2**20


def _is_stream(path: Path) -> bool:
    """Whether ``path`` exists and is a character/block device, FIFO or socket (or a link to one,
    such as ``/dev/stdout``): written to in place, never replaced by a renamed temp file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _os_error(target: Path, err: OSError, *, stream: bool = False) -> TileplanError:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        kept = "" if stream else f"; nothing was written and an existing {target.name} is unchanged"
        return TileplanError(f"cannot write {target}: no space left on the device (disk full){kept}; free some "
                             f"space and run again")
    return TileplanError(f"cannot write {target}: {err.strerror or err}")


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
    if _is_stream(target):
        if not os.access(target, os.W_OK):
            raise TileplanError(f"cannot write {target}: permission denied")
        return target
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
    if _is_stream(target):
        _stream(target, data)
        return
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    except OSError as err:
        raise _os_error(target, err) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # a full disk fails here, before the old file is replaced
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise _os_error(target, err) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode())


def _stream(target: Path, data: bytes) -> None:
    """Write ``data`` into the device, FIFO or socket ``target`` (no temp file, no rename)."""
    try:
        fd = os.open(target, os.O_WRONLY)
    except OSError as err:
        raise _os_error(target, err) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as err:
        raise _os_error(target, err, stream=True) from None
    finally:
        os.close(fd)


def _identity(path: Path) -> tuple[int, int] | str:
    """What makes two paths the same file: device and inode when it exists (hard and symbolic links
    too), else the resolved path."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return (st.st_dev, st.st_ino)


def check_distinct(outputs: Sequence[tuple[str, str | Path | None]],
                   inputs: Sequence[tuple[str, str | Path | None]] = ()) -> None:
    """Refuse, before any work, an output that is one of the command's input files or another of
    its outputs. ``outputs`` and ``inputs`` are (what the user calls it, path or None) pairs, e.g.
    ``("--json", "plan.json")`` and ``("the model file", "m.onnx")``; an input that is no existing
    file (a zoo or preset name) is skipped, and so are devices and pipes (``/dev/null`` twice is fine).
    """
    seen: dict[tuple[int, int] | str, str] = {}
    for label, value in inputs:
        if value is None or not Path(value).is_file():
            continue
        seen.setdefault(_identity(Path(value)), f"{label} {value}")
    written: dict[tuple[int, int] | str, str] = {}
    for label, value in outputs:
        if value is None or _is_stream(Path(value)):
            continue
        key = _identity(Path(value))
        if key in seen:
            raise TileplanError(f"{label} {value} is {seen[key]}: refusing to overwrite an input; give "
                                f"the output another path")
        if key in written:
            raise TileplanError(f"{written[key]} and {label} {value} are the same file; give each output "
                                f"its own path")
        written[key] = f"{label} {value}"


def read_text_input(path: str | Path, what: str, *, limit: int = MAX_TEXT_INPUT_BYTES) -> str:
    """The UTF-8 text of the input file ``path`` (``what`` names it in errors: "accelerator file"),
    read with a size cap so that ``/dev/zero`` or a huge file is one clear error, not a memory blow-up.
    Raises ``TileplanError`` (missing, unreadable, too big, not UTF-8)."""
    target = Path(path)
    a_what = f"{'an' if what[:1] in 'aeiou' else 'a'} {what}"
    try:
        with open(target, "rb") as fh:
            data = fh.read(limit + 1)
    except IsADirectoryError:
        raise TileplanError(f"{target}: is a folder, not {a_what}") from None
    except OSError as err:
        raise TileplanError(f"{target}: cannot read the {what} ({err.strerror or err})") from None
    if len(data) > limit:
        raise TileplanError(f"{target}: larger than {limit // 2**20} MiB, too big for {a_what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TileplanError(f"{target}: not a UTF-8 text file, so not {a_what}") from None


def csv_cell(value: object) -> object:
    """``value`` made safe for a spreadsheet: a text cell that begins with ``=``, ``+``, ``-``, ``@``
    (or a tab or carriage return) would run as a formula, so it gets a leading ``'``; numbers, and
    text that reads as a number (``-3``, ``-1e-05``), stay as they are.

    >>> [csv_cell(v) for v in ("=1+1", "-2.5", "@SUM(A1)", "conv1", -3)]
    ["'=1+1", '-2.5', "'@SUM(A1)", 'conv1', -3]
    """
    if not isinstance(value, str) or value[:1] not in ("=", "+", "-", "@", "\t", "\r"):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def csv_row(row: dict[str, object]) -> dict[str, object]:
    """A CSV row (column -> value) with every text cell passed through :func:`csv_cell`."""
    return {k: csv_cell(v) for k, v in row.items()}


def read_json_input(path: str | Path, what: str, where: str, kind: str) -> Any:
    """The parsed JSON of the input file ``path`` (read as :func:`read_text_input` reads it, ``what``
    naming it). Invalid JSON is one error starting with ``where`` ("mapping file m.json is") and a
    document nested too deeply to parse says it cannot be ``kind`` ("a mapping")."""
    import json

    text = read_text_input(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise TileplanError(f"{where} not valid JSON (line {err.lineno}: {err.msg})") from None
    except RecursionError:
        raise TileplanError(f"{where} nested too deeply to be {kind}") from None
