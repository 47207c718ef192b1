"""ruff users keep perflint's `# noqa: PFL...` codes with `[tool.ruff.lint] external = ["PFL"]`
(docs/ci.md). Checked against the real ruff, which the `[test]` extra installs: in CI
(`CI` set) a missing ruff fails these tests instead of skipping them."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

if importlib.util.find_spec("ruff") is not None:
    RUFF = [sys.executable, "-m", "ruff"]
elif shutil.which("ruff"):
    RUFF = [shutil.which("ruff")]
else:
    RUFF = None
pytestmark = [pytest.mark.subprocess,
              pytest.mark.skipif(RUFF is None and not os.environ.get("CI"),
                                 reason="ruff is not installed (pip install -e '.[test]' installs it)")]

SOURCE = "x = 1  # noqa: PFL201\ny = 2  # noqa: PFL201, E501\n"


def _ruff_fix(tmp_path, config: str) -> str:
    assert RUFF is not None, "ruff is not installed: the [test] extra installs it (pip install -e '.[test]')"
    (tmp_path / "pyproject.toml").write_text(config)
    path = tmp_path / "a.py"
    path.write_text(SOURCE)
    subprocess.run([*RUFF, "check", "--no-cache", "--select", "F,RUF100", "--fix", "a.py"], cwd=tmp_path,
                   capture_output=True, text=True, check=False)
    return path.read_text()


def test_external_keeps_our_codes_through_ruf100_fixes(tmp_path):
    fixed = _ruff_fix(tmp_path, '[tool.ruff.lint]\nexternal = ["PFL"]\n')
    assert fixed == "x = 1  # noqa: PFL201\ny = 2  # noqa: PFL201\n"


def test_without_external_ruff_drops_our_code_from_a_shared_comment(tmp_path):
    """Why the docs ask for `external`: the RUF100 fix for the unused E501 takes PFL201 with it."""
    fixed = _ruff_fix(tmp_path, "[tool.ruff]\n")
    assert fixed.splitlines()[0] == "x = 1  # noqa: PFL201"
    assert fixed.splitlines()[1] == "y = 2"
