from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from perflint.registry import all_rules


def pytest_configure(config):  # noqa: D103
    config.addinivalue_line("markers", "torch: needs PyTorch (skipped when it is not installed)")
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (skipped when none is available)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # One of several test processes sharing the cores (pytest-xdist): a torch thread pool
        # of one thread per core in each would oversubscribe them (torch is imported later).
        os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):  # noqa: D103
    for item in items:
        if "torch" in item.keywords and not _has_torch():
            item.add_marker(pytest.mark.skip(reason="torch is not installed"))
        if "cuda" in item.keywords and not _has_cuda():
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _has_cuda() -> bool:
    if not _has_torch():
        return False
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="session")
def rules():
    return all_rules()


# --------------------------------------------------------------------------- snapshots
SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE_ENV = "PERFLINT_UPDATE_SNAPSHOTS"


@pytest.fixture
def snapshot():
    """`snapshot(name, text)`: compare with tests/snapshots/<name>; run with
    PERFLINT_UPDATE_SNAPSHOTS=1 to (re)write the golden files."""

    def check(name: str, text: str) -> None:
        path = SNAPSHOTS / name
        if os.environ.get(UPDATE_ENV):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            return
        assert path.exists(), f"no snapshot {path}; run with {UPDATE_ENV}=1 to create it"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"{name} changed; run with {UPDATE_ENV}=1 to accept\n" + "".join(
            difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "snapshot", "now"))

    return check


# --------------------------------------------------------------------------- permissions
@pytest.fixture
def deny(monkeypatch):
    """`deny(path)`: opening `path` (a file) or listing it (a directory) fails with EACCES,
    and so does anything below it (stat, open), as for a user on a mode-000 entry; `os.access`
    says no. Tests and CI run as root, which ignores file modes, so the permission tests use
    this; each also has a variant with real modes (`as_a_user`), which runs where modes are
    enforced."""
    import builtins
    import errno
    import io

    denied: set[str] = set()

    def blocked(path) -> bool:
        if isinstance(path, int):
            return False
        try:
            absolute = os.path.abspath(os.fsdecode(path))
        except TypeError:
            return False
        return absolute in denied or below(absolute)

    def below(absolute: str) -> bool:  # inside a denied directory: not even stat works
        return any(absolute.startswith(d + os.sep) for d in denied)

    def error(path) -> PermissionError:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))

    real_open, real_scandir, real_listdir, real_access = io.open, os.scandir, os.listdir, os.access
    real_stat, real_lstat = os.stat, os.lstat

    def fake_stat(path, *args, **kwargs):
        if not isinstance(path, int) and below(os.path.abspath(os.fsdecode(path))):
            raise error(path)
        return real_stat(path, *args, **kwargs)

    def fake_lstat(path, *args, **kwargs):
        if below(os.path.abspath(os.fsdecode(path))):
            raise error(path)
        return real_lstat(path, *args, **kwargs)

    def fake_open(file, *args, **kwargs):
        if blocked(file):
            raise error(file)
        return real_open(file, *args, **kwargs)

    def fake_scandir(path="."):
        if blocked(path):
            raise error(path)
        return real_scandir(path)

    def fake_listdir(path="."):
        if blocked(path):
            raise error(path)
        return real_listdir(path)

    def fake_access(path, mode, *args, **kwargs):
        if blocked(path) and mode & (os.R_OK | os.X_OK):
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "scandir", fake_scandir)
    monkeypatch.setattr(os, "listdir", fake_listdir)
    monkeypatch.setattr(os, "access", fake_access)
    monkeypatch.setattr(os, "stat", fake_stat)
    monkeypatch.setattr(os, "lstat", fake_lstat)

    def add(path) -> None:
        denied.add(os.path.abspath(path))

    return add


def _modes_enforced() -> bool:
    """Does a mode-000 file refuse to open? Not for root (nor a process with the
    CAP_DAC_OVERRIDE capability)."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        probe = os.path.join(directory, "probe")
        with open(probe, "w"):
            pass
        os.chmod(probe, 0)
        try:
            with open(probe):
                return False
        except PermissionError:
            return True
        finally:
            os.chmod(probe, 0o600)


as_a_user = pytest.mark.skipif(not _modes_enforced(),
                               reason="file modes are not enforced for root (the `deny` variant runs instead)")


# --------------------------------------------------------------------------- processes
# A test that starts a process (an interpreter, git, pre-commit) costs about a second; the
# README's test command must stay fast on 2 cores. Such tests are marked `subprocess`, and
# there are at most this many: check in-process (click's CliRunner) instead where you can.
# (17: the GPU proof script and the peer-suites pipeline are shell/venv end-to-end checks.)
SUBPROCESS_BUDGET = 17
TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def _processes_are_marked(request, monkeypatch):
    """A test (or its fixture) that starts a process itself must be marked `subprocess`.
    Processes that libraries start (matplotlib's font lookup) do not count."""
    if request.node.get_closest_marker("subprocess") is not None:
        return
    import subprocess
    import sys

    real = subprocess.Popen
    nodeid = request.node.nodeid

    class Unmarked(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename == subprocess.__file__:
                frame = frame.f_back
            if frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(TESTS + os.sep):
                raise AssertionError(f"{nodeid} starts a process: do it in-process (click.testing.CliRunner) or "
                                     "mark the test @pytest.mark.subprocess (their number is capped: "
                                     "SUBPROCESS_BUDGET in tests/conftest.py)")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Unmarked)
