from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from perflint.registry import all_rules


def pytest_configure(config):  # noqa: D103
    config.addinivalue_line("markers", "torch: needs PyTorch (skipped when it is not installed)")
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (skipped when none is available)")


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
