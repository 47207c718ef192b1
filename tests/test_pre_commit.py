"""The real `pre-commit try-repo` against a snapshot of this checkout: the hooks install
from the repository with pip (so they need the package index), run on files pre-commit
passes by name, and honour [tool.perflint] excludes through --force-exclude.

Slow (each try-repo builds a fresh virtualenv, about 30 s): deselect with `-m "not slow"`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]
REPO = Path(__file__).resolve().parent.parent
BAD = "import torch\n\nfor x, y in loader:\n    loss = model(x)\n    total = loss.item()\n"
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Notes"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["import torch\n", "for x, y in loader:\n", "    v = model(x).item()\n"]},
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5,
}


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never", GIT_AUTHOR_NAME="t",
               GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return env


def _git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """This checkout (tracked and untracked, not ignored, files) as a one-commit repository:
    try-repo needs a commit, and this way uncommitted work is what gets tested."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    pytest.importorskip("pre_commit")
    base = tmp_path_factory.mktemp("precommit")
    env = _env(base / "home")
    try:
        listed = _git("ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=REPO, env=env)
    except subprocess.CalledProcessError:
        pytest.skip("this checkout is not a git repository")
    repo = base / "hook-repo"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    _git("init", "-q", cwd=repo, env=env)
    _git("add", "-A", cwd=repo, env=env)
    _git("commit", "-q", "-m", "snapshot", cwd=repo, env=env)
    return repo, _git("rev-parse", "HEAD", cwd=repo, env=env).strip(), base


def _project(base: Path, name: str, files: dict[str, str]) -> Path:
    work = base / name
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    env = _env(base / "home")
    _git("init", "-q", cwd=work, env=env)
    _git("add", "-A", cwd=work, env=env)
    return work


def _try_repo(hook_repo, work: Path, *hook: str) -> subprocess.CompletedProcess:
    repo, sha, base = hook_repo
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(repo), *hook, "--ref", sha, "--all-files"],
        cwd=work, env=_env(base / "home"), capture_output=True, text=True, timeout=600,
    )


def test_hooks_fail_on_findings_fix_files_and_honour_excludes(hook_repo):
    _repo, _sha, base = hook_repo
    work = _project(base, "dirty", {
        "train.py": BAD,
        "fixable.py": "x = 1  # noqa: PFL201\n",
        "generated/model_pb2.py": BAD,
        "nb.ipynb": json.dumps(NOTEBOOK, indent=1) + "\n",
        "README.md": "x.item()\n",
        "pyproject.toml": '[tool.perflint]\nextend-exclude = ["generated"]\n',
    })
    result = _try_repo(hook_repo, work)  # both hooks, in file order: check, then fix
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    check, _, fix = out.partition("perflint (fix)")
    assert "perflint (check)" in check and "Failed" in check
    assert "train.py:5:13: PFL201" in check
    assert "nb.ipynb:cell 2:3:9: PFL201" in check
    assert "fixable.py:1:8: PFL002 [*]" in check
    assert "generated/" not in out, "--force-exclude applies extend-exclude to files passed by name"
    assert "README" not in out
    assert "files were modified by this hook" in fix
    assert (work / "fixable.py").read_text() == "x = 1\n"
    assert (work / "train.py").read_text() == BAD


def test_check_hook_passes_on_clean_code(hook_repo):
    _repo, _sha, base = hook_repo
    work = _project(base, "clean", {"clean.py": "import torch\n\nx = torch.ones(3)\nprint(x.sum().item())\n"})
    result = _try_repo(hook_repo, work, "perflint-check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "perflint (check)" in result.stdout and "Passed" in result.stdout
