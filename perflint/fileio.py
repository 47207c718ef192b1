"""Writing fixed files without ever losing user code.

The new bytes go to a temporary file in the same directory, which takes the original's
permission bits and then replaces it atomically. If the file changed on disk since it was
read (an editor saved it, another tool fixed it), it is left alone.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable


class ChangedOnDisk(Exception):
    """The file no longer holds the bytes that were read and fixed."""


class WriteError(OSError):
    """A fixed file could not be written; the message names the file and says why."""


def read_error(path: Path, exc: OSError, what: str = "file") -> str:
    """Why `path` cannot be read, for a PFL001 line: `cannot read file: Permission denied`,
    `... symbolic link loop`, `... broken symbolic link` (`what`: what could not be read)."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno == errno.ELOOP:
        reason = "symbolic link loop"
    elif os.path.islink(path) and not os.path.exists(path):
        reason = "broken symbolic link"
    return f"cannot read {what}: {reason}"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def replace_file(target: Path, data: bytes, *, suffix: str = ".perflint.tmp", mode: int | None = None,
                 durable: bool = False, check: Callable[[], None] | None = None) -> None:
    """Write `data` to a temporary file beside `target`, then rename it over `target`: a
    reader sees the old bytes or the new ones, never half of them. `check` runs right before
    the rename and may raise to abandon the write (the temporary file is removed)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if check is not None:
            check()
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: Path, data: bytes, original: bytes) -> None:
    """Replace `path` with `data`, provided it still contains `original`."""
    target = Path(os.path.realpath(path))  # write through symlinks, keep the link
    try:
        current = target.read_bytes()
    except OSError as exc:
        raise ChangedOnDisk(f"cannot re-read {path}: {exc.strerror}") from None
    if current != original:
        raise ChangedOnDisk(f"{path} changed on disk since it was read; not overwriting it")

    def unchanged() -> None:  # the last check right before the swap keeps the race window small
        if target.read_bytes() != original:
            raise ChangedOnDisk(f"{path} changed on disk since it was read; not overwriting it")

    try:
        replace_file(target, data, mode=stat.S_IMODE(target.stat().st_mode), durable=True, check=unchanged)
    except ChangedOnDisk:
        raise
    except OSError as exc:
        raise WriteError(_write_failure(path, target, exc)) from None


def _write_failure(path: Path, target: Path, exc: OSError) -> str:
    """`cannot write a.py: ...`, naming the user's file, never the temporary file beside it."""
    reason = exc.strerror or str(exc)
    temporary = exc.filename is not None and os.path.basename(os.fsdecode(exc.filename)).startswith(f".{target.name}.")
    if temporary and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {path}: its directory {target.parent} is not writable ({reason})"
    return f"cannot write {path}: {reason}"
