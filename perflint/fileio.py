"""Writing fixed files without ever losing user code.

The new bytes go to a temporary file in the same directory, which takes the original's
permission bits and then replaces it atomically. If the file changed on disk since it was
read (an editor saved it, another tool fixed it), it is left alone.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path


class ChangedOnDisk(Exception):
    """The file no longer holds the bytes that were read and fixed."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: Path, data: bytes, original: bytes) -> None:
    """Replace `path` with `data`, provided it still contains `original`."""
    target = Path(os.path.realpath(path))  # write through symlinks, keep the link
    try:
        current = target.read_bytes()
    except OSError as exc:
        raise ChangedOnDisk(f"cannot re-read {path}: {exc.strerror}") from None
    if current != original:
        raise ChangedOnDisk(f"{path} changed on disk since it was read; not overwriting it")
    mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".perflint.tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        # Last check right before the swap keeps the race window as small as it can be.
        if target.read_bytes() != original:
            raise ChangedOnDisk(f"{path} changed on disk since it was read; not overwriting it")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
