"""The results cache: `.perflint_cache/` at the project root.

Layout (one directory per perflint version, as ruff does):

    .perflint_cache/
        CACHEDIR.TAG  .gitignore          # tools skip it; git ignores it
        0.1.0/
            entries/3f/3f9c...e1          # one file per (code, settings, rules, path, content)
            index.json                    # stat -> content hash, to avoid reading files
            projects/<hash>.json          # the last whole-project result (perflint.snapshot)

*Entries* are the source of truth. An entry's name is a hash of everything that decides a
file's diagnostics: perflint's code (version plus a hash of its sources, so a development
checkout never serves results of older code), the Python and libcst versions, the settings
(`Settings.key()`), the rules that apply to this file (after per-file-ignores), the path
as displayed (diagnostics carry it) and the file's content hash. An entry holds the file's
diagnostics, fixes included, as `Diagnostic.to_json()`. Entries are immutable and written
to a temporary file that is then renamed over the name, so a reader sees a whole entry or
none, and two runs writing the same entry at once write the same bytes. A corrupt entry
is ignored (the file is linted again and the entry rewritten).

The *index* only saves reading and hashing unchanged files: it maps a path to the stat
(device, inode, size, mtime_ns, ctime_ns) it had when its content hash was computed, and
notes when that content's entry is clean (no entry to open for most files). It
is trusted only when the file's mtime and ctime were already older than `RACY_NS` when the
file was read: a file written in the same timestamp tick as it was read (file systems
keep times in ticks of up to 2 s) could change again without changing its stat, so such a
file is hashed again on the next run (git's "racily clean" problem). ctime cannot be set
by tools that restore mtimes, so `touch -d` or an editor keeping the mtime still counts as
a change. The index is merged and replaced atomically at the end of a run; a lost update
from a concurrent run only costs a re-hash.

Entries unused for `PRUNE_AFTER_DAYS` (and other versions' directories) are removed at
most once a day.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from . import __version__
from .config import Settings, env_flag
from .engine import FileResult
from .fileio import replace_file
from .files import Target
from .types import Diagnostic

CACHE_DIR_NAME = ".perflint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by perflint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Automatically created by perflint.\n*\n"
RACY_NS = 3_000_000_000
PRUNE_AFTER_DAYS = 30
_DAY = 86_400
_INDEX_FORMAT = 4  # 4: clean means no findings and nothing that crosses into other files
_TMP_SUFFIX = ".tmp"
PROJECTS = "projects"

# An index record: dev, ino, size, mtime_ns, ctime_ns, content hash, trusted, last-seen day,
# and the entry key when that entry is clean (most files: no entry to open for them).
Record = list
_STAT_FIELDS = 5
_HASH, _TRUSTED, _DAY_SEEN, _CLEAN = 5, 6, 7, 8
_RECORD_LEN = 9


def content_hash(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def today() -> int:
    return int(time.time() // _DAY)


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """perflint's version, a hash of its own and its rules' sources, and the versions of
    what shapes results (Python's ast, libcst's rewrites)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{__version__}\0{sys.version}\0{sys.implementation.cache_tag}\0".encode())
    for package in ("perflint", "perflint_rules"):
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).parent
        for file in sorted(root.rglob("*.py")):
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
            try:
                digest.update(file.read_bytes())
            except OSError:
                digest.update(b"<unreadable>")
    # PathFinder looks on sys.path without touching sys.modules: find_spec("libcst") would
    # run the lazy import that perflint.rewrite set up.
    spec = importlib.machinery.PathFinder.find_spec("libcst")
    if spec is not None and spec.origin is not None:
        version_file = Path(spec.origin).parent / "_version.py"
        try:
            digest.update(version_file.read_bytes())
        except OSError:
            digest.update(spec.origin.encode())
    return digest.hexdigest()


def cacheable(result: FileResult) -> bool:
    """Results that depend on the content alone (not on a crash or on memory)."""
    error = result.error
    if error is None:
        return True
    return "internal error" not in error and "worker process" not in error and "Memory" not in error


def result_to_json(result: FileResult) -> dict:
    """A file's result as plain JSON data (what an entry stores)."""
    return {
        "path": result.path,
        "error": result.error,
        "parsed": result.parsed,
        "diagnostics": [d.to_json() for d in result.diagnostics],
        "hot_calls": list(result.hot_calls),
        "reexports": [list(pair) for pair in result.reexports],
        "origins": [[call, list(steps), seed] for call, steps, seed in result.hot_call_origins],
        "bound": list(result.bound_calls),
        "calls": list(result.calls),
        "summaries": list(result.summaries),
        "overrides": list(result.overrides),
        "bases": list(result.bases),
    }


def result_from_json(entry: dict) -> FileResult:
    """The inverse of `result_to_json`; raises on data of another shape."""
    return FileResult(
        entry["path"],
        [Diagnostic.from_json(d) for d in entry["diagnostics"]],
        error=entry["error"],
        parsed=bool(entry["parsed"]),
        hot_calls=tuple(entry["hot_calls"]),
        reexports=tuple((name, source) for name, source in entry["reexports"]),
        hot_call_origins=tuple((call, tuple(steps), seed) for call, steps, seed in entry["origins"]),
        bound_calls=tuple(entry["bound"]),
        calls=tuple(entry["calls"]),
        summaries=tuple(entry["summaries"]),
        overrides=tuple(entry["overrides"]),
        bases=tuple(entry["bases"]),
    )


def keep_alive(path: Path, mtime: float) -> None:
    """Mark a cache file in use (at most once a day), so that pruning keeps it."""
    if mtime < time.time() - _DAY:
        try:
            os.utime(path)
        except OSError:
            pass


def _write_atomic(path: Path, data: bytes) -> None:
    replace_file(path, data, suffix=_TMP_SUFFIX)


def ensure_cache_dir(directory: Path) -> None:
    """Create the cache directory with its CACHEDIR.TAG and .gitignore."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", GITIGNORE)):
        path = directory / name
        if not path.exists():
            _write_atomic(path, text.encode())


def is_perflint_cache(directory: Path) -> bool:
    """Was `directory` created by perflint (it has perflint's CACHEDIR.TAG)?"""
    try:
        tag = (directory / "CACHEDIR.TAG").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return tag.startswith(CACHEDIR_TAG.splitlines()[0]) and "created by perflint" in tag


class Cache:
    """Per-file results on disk. Lookups by stat happen in the parent process; `lint`
    (read, hash, look up by content, else lint and store) runs in the workers."""

    def __init__(self, directory: Path, fingerprint: str | None = None) -> None:
        self.directory = directory
        self.fingerprint = fingerprint or code_fingerprint()
        self.base = directory / __version__
        self.entries = self.base / "entries"
        self.projects = self.base / PROJECTS  # project snapshots (see perflint.snapshot)
        self.index_path = self.base / "index.json"
        self._index: dict[str, Record] | None = None
        self._updates: dict[str, Record] = {}
        self._prefixes: dict[int, tuple[Settings, str]] = {}
        self._today = today()
        self.entries_written = 0

    @classmethod
    def open(cls, directory: Path, fingerprint: str | None = None) -> Cache:
        """Create (if needed) and open the cache; raises OSError when that is impossible."""
        ensure_cache_dir(directory)
        cache = cls(directory, fingerprint)
        cache.entries.mkdir(parents=True, exist_ok=True)
        return cache

    # ----------------------------------------------------------------- keys
    def entry_key(self, target: Target, display: str, digest: str, hot: frozenset[str] = frozenset()) -> str:
        settings = target.settings
        cached = self._prefixes.get(id(settings))
        if cached is None or cached[0] is not settings:
            prefix = f"{self.fingerprint}\0{settings.key()}"
            cached = self._prefixes[id(settings)] = (settings, prefix)
        codes = ",".join(r.code for r in settings.rules_for(target.path))
        text = f"{cached[1]}\0{codes}\0{display}\0{digest}"
        if hot:  # functions the project pass found hot in this file: another result
            text += "\0" + ",".join(sorted(hot))
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def _entry_path(self, key: str) -> Path:
        return self.entries / key[:2] / key

    # ----------------------------------------------------------------- entries
    def read_entry(self, key: str) -> FileResult | None:
        """The stored result, or None when absent or unreadable in any way."""
        path = self._entry_path(key)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
                mtime = os.fstat(handle.fileno()).st_mtime
        except OSError:
            return None
        try:
            entry = json.loads(data)
            if entry["key"] != key:
                return None
            result = result_from_json(entry)
        except Exception:  # corrupt, truncated, foreign, older format: lint again
            return None
        keep_alive(path, mtime)
        return result

    def write_entry(self, key: str, result: FileResult) -> None:
        entry = {"key": key, **result_to_json(result)}
        path = self._entry_path(key)
        try:
            path.parent.mkdir(exist_ok=True)
            _write_atomic(path, json.dumps(entry, separators=(",", ":")).encode())
            self.entries_written += 1
        except OSError:
            pass  # a full disk or a read-only cache costs speed, never results

    # ----------------------------------------------------------------- index
    @property
    def index(self) -> dict[str, Record]:
        if self._index is None:
            self._index = self._load_index()
        return self._index

    def _load_index(self) -> dict[str, Record]:
        try:
            data = json.loads(self.index_path.read_bytes())
            if data.get("format") != _INDEX_FORMAT or not isinstance(data.get("records"), dict):
                return {}
            return {k: v for k, v in data["records"].items() if isinstance(v, list) and len(v) == _RECORD_LEN}
        except Exception:
            return {}

    def probe(self, target: Target, display: str,
              hot: frozenset[str] = frozenset()) -> tuple[FileResult | None, int]:
        """(the cached result if the file is unchanged by stat, else None; its size).
        `hot`: the functions the project pass seeds (another entry, found without reading
        the file: the index knows its content hash)."""
        record, size = self._unchanged(target)
        if record is None:
            return None, size
        key = self.entry_key(target, display, record[_HASH], hot)
        if record[_CLEAN] == key and not hot:
            result: FileResult | None = FileResult(display, parsed=True)
        else:
            result = self.read_entry(key)
        if result is not None and record[_DAY_SEEN] != self._today and not hot:
            self.remember(target, record[:_DAY_SEEN] + [self._today, record[_CLEAN]])
        return result, size

    def _unchanged(self, target: Target) -> tuple[Record | None, int]:
        """(the index record of the file when its stat says it is unchanged, else None; its size)."""
        try:
            st = os.stat(target.path)
        except OSError:
            return None, 0
        record = self.index.get(os.path.abspath(target.path))
        if record is None or not record[_TRUSTED] or record[:_STAT_FIELDS] != stat_key(st):
            return None, st.st_size
        return record, st.st_size

    def unchanged_key(self, target: Target, display: str) -> str | None:
        """The key of the file's (unseeded) entry when its stat says it is unchanged since
        its content was hashed, else None: what a project snapshot is checked against."""
        record, _size = self._unchanged(target)
        return None if record is None else self.entry_key(target, display, record[_HASH])

    def remember(self, target: Target, record: Record | None) -> None:
        if record is not None:
            self._updates[os.path.abspath(target.path)] = record

    def lint(self, target: Target, display: str,
             lint_fn: Callable[[Target, Optional[bytes]], FileResult],
             hot: frozenset[str] = frozenset()) -> tuple[FileResult, Record | None]:
        """Read and hash the file; reuse the entry for this content, else lint and store.
        `hot`: functions the project pass seeds as hot (part of the entry's key)."""
        try:
            with open(target.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                raw = handle.read()
        except OSError:
            return lint_fn(target, None), None  # lint_target reports why it cannot be read
        digest = content_hash(raw)
        key = self.entry_key(target, display, digest, hot)
        result = self.read_entry(key)
        if result is None:
            result = lint_fn(target, raw)
            if cacheable(result):
                self.write_entry(key, result)
        trusted = max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RACY_NS
        if hot:
            return result, None  # the index describes the file's own (unseeded) result
        clean = key if not result.diagnostics and result.error is None and result.parsed \
            and not result.hot_calls and not result.reexports and not result.bound_calls \
            and not result.calls and not result.summaries and not result.overrides and not result.bases else ""
        return result, stat_key(st) + [digest, trusted, self._today, clean]

    # ----------------------------------------------------------------- end of run
    def flush(self) -> None:
        """Merge this run's index records into the file on disk; prune once a day."""
        if self._updates:
            merged = self._load_index()  # what concurrent runs wrote meanwhile
            merged.update(self._updates)
            oldest = self._today - PRUNE_AFTER_DAYS
            merged = {k: v for k, v in merged.items() if isinstance(v[_DAY_SEEN], int) and v[_DAY_SEEN] >= oldest}
            data = json.dumps({"format": _INDEX_FORMAT, "records": merged}, separators=(",", ":"))
            try:
                _write_atomic(self.index_path, data.encode())
            except OSError:
                pass
            self._index = merged
            self._updates = {}
        if self.entries_written:
            self._prune_daily()

    def _prune_daily(self) -> None:
        marker = self.base / "last-prune"
        now = time.time()
        try:
            if now - marker.stat().st_mtime < _DAY:
                return
        except OSError:
            pass
        try:
            marker.touch()
        except OSError:
            return
        prune(self.directory, keep_version=__version__, now=now)


def prune(directory: Path, keep_version: str, now: float) -> int:
    """Remove entries and project snapshots unused for PRUNE_AFTER_DAYS, temporary files
    left by killed runs, and other versions' directories unused for as long. Returns the
    number removed."""
    removed = 0
    too_old = now - PRUNE_AFTER_DAYS * _DAY
    base = directory / keep_version
    folders = [Path(bucket.path) for bucket in _scandir(base / "entries")] + [base / PROJECTS]
    for folder in folders:
        for entry in _scandir(folder):
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
                stale_tmp = entry.name.endswith(_TMP_SUFFIX) and mtime < now - 3600
                if mtime < too_old or stale_tmp:
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                pass
    for version_dir in _scandir(directory):
        if version_dir.name == keep_version or not version_dir.is_dir(follow_symlinks=False):
            continue
        try:
            last_used = max(version_dir.stat().st_mtime, (Path(version_dir.path) / "index.json").stat().st_mtime)
        except OSError:
            last_used = 0.0
        if last_used < too_old and (Path(version_dir.path) / "entries").is_dir():
            shutil.rmtree(version_dir.path, ignore_errors=True)
            removed += 1
    return removed


def _scandir(path: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


# --------------------------------------------------------------------------- configuration
def cache_directory(settings: Settings, cli_dir: Path | None = None) -> Path:
    """Where the cache lives: --cache-dir, $PERFLINT_CACHE_DIR, `cache-dir` (relative to the
    project root) or `.perflint_cache` at the project root (the directory of the nearest
    pyproject.toml with [tool.perflint], else the working directory)."""
    if cli_dir is not None:
        return cli_dir
    env = os.environ.get("PERFLINT_CACHE_DIR")
    if env:
        return Path(env)
    if settings.cache_dir:
        return settings.root / settings.cache_dir
    return settings.root / CACHE_DIR_NAME


def cache_enabled(settings: Settings, no_cache: bool = False) -> bool:
    return not no_cache and not env_flag("PERFLINT_NO_CACHE") and settings.cache


def open_cache(settings: Settings, *, no_cache: bool = False, cli_dir: Path | None = None,
               create: bool = True) -> tuple[Cache | None, str | None]:
    """(the cache, or None; a warning when it was wanted but cannot be used).

    `create=False` (fixing, which only reads the cache) uses an existing cache and never
    creates one."""
    if not cache_enabled(settings, no_cache):
        return None, None
    directory = cache_directory(settings, cli_dir)
    if not create and not directory.is_dir():
        return None, None
    try:
        return Cache.open(directory), None
    except OSError as exc:
        return None, f"cannot use the cache at {directory}: {exc.strerror or exc}; running without it"


def clean(paths: list[Path], configured: Path | None) -> list[Path]:
    """Remove perflint cache directories: the configured one and any `.perflint_cache` below
    `paths` (symbolic links are not followed). Returns what was removed."""
    removed: list[Path] = []
    candidates: list[Path] = []
    if configured is not None and configured.is_dir():
        candidates.append(configured)
    for root in paths:
        if root.name == CACHE_DIR_NAME and root.is_dir():
            candidates.append(root)
            continue
        for current, dirs, _files in os.walk(root):
            if CACHE_DIR_NAME in dirs:
                candidates.append(Path(current) / CACHE_DIR_NAME)
            dirs[:] = [d for d in dirs if d not in (CACHE_DIR_NAME, ".git", ".hg", ".svn")]
    seen: set[str] = set()
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if real in seen:
            continue
        seen.add(real)
        # A --cache-dir can point anywhere: only remove what perflint created.
        if candidate.name != CACHE_DIR_NAME and not is_perflint_cache(candidate):
            continue
        if candidate.is_symlink():
            candidate.unlink()
        else:
            shutil.rmtree(candidate, ignore_errors=True)
        removed.append(candidate)
    return removed

