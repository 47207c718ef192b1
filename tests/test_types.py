"""The package type-checks: mypy (configured in pyproject.toml's `[tool.mypy]`) reports no
error in `perflint/` and `rules/`. The `[test]` extra installs mypy: in CI (`CI` set) a
missing mypy fails this test instead of skipping it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None and not os.environ.get("CI"),
                                reason="mypy is not installed (pip install -e '.[test]' installs it)")


def test_mypy_finds_no_type_errors(tmp_path, monkeypatch):
    from mypy import api  # in-process: no interpreter start (tests/conftest.py's budget)

    monkeypatch.chdir(ROOT)  # where pyproject.toml's [tool.mypy] names the files
    stdout, stderr, status = api.run(["--cache-dir", str(tmp_path / "cache")])
    assert status == 0, stdout + stderr
    assert "Success: no issues found" in stdout
