"""The project snapshot: a warm run of an unchanged tree is served whole, and anything that
could change a finding in any file (an edit in another file, a file added or removed,
another setting, a corrupt snapshot) falls back to the project pass."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint import cache as cache_module
from perflint import runner
from perflint.api import check_paths, fix_paths
from perflint.cache import Cache
from perflint.cli import main
from perflint.config import SettingsResolver
from project_files import write_project

HELPERS = """
    def log_metric(t):
        return t.item()

    def log_quietly(t):
        return t.item()  # noqa: PFL201
"""
TRAIN = """
    from helpers import log_metric, log_quietly
    for x in loader:
        loss = model(x).sum(); loss.backward()
        log_metric(loss)
        log_quietly(loss)
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    # Trust every stat at once: the snapshot is used only for files whose stat says they
    # are unchanged, which the cache trusts only seconds after they were written.
    monkeypatch.setattr(cache_module, "RACY_NS", 0)
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": '[project]\nname = "proj"\n', "helpers.py": HELPERS, "train.py": TRAIN})
    monkeypatch.chdir(root)
    return root


def _check(*paths: str, cache_dir: Path) -> list[tuple[str, int, str, tuple]]:
    report = check_paths([Path(p) for p in paths], SettingsResolver(Path.cwd()), jobs=1, cache=Cache.open(cache_dir))
    return [(d.path, d.location.row, d.code, tuple(d.extra.get("hot_path", ()))) for d in report.diagnostics]


def _no_project_pass(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the project pass ran: the snapshot was not used")
    monkeypatch.setattr(runner, "_project_pass", refuse)


def test_an_unchanged_tree_is_served_from_the_snapshot_whatever_files_are_named(project, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    full = _check(".", cache_dir=cache_dir)
    assert [(path, row, code) for path, row, code, _chain in full] == [("helpers.py", 2, "PFL201")]
    assert full[0][3], "the chain from the caller in train.py is attached"
    _no_project_pass(monkeypatch)
    assert _check(".", cache_dir=cache_dir) == full
    assert _check("helpers.py", cache_dir=cache_dir) == full  # a pre-commit run of one staged file
    assert _check("train.py", cache_dir=cache_dir) == []


def test_an_edit_in_the_caller_changes_the_callee_findings(project, tmp_path):
    cache_dir = tmp_path / "cache"
    assert _codes(_check("helpers.py", cache_dir=cache_dir)) == [(2, "PFL201")]
    write_project(project, {"train.py": TRAIN.replace("        log_metric(loss)\n", "")})
    assert _check("helpers.py", cache_dir=cache_dir) == []
    assert _check(".", cache_dir=cache_dir) == []


def _codes(findings) -> list[tuple[int, str]]:
    return [(row, code) for _path, row, code, _chain in findings]


def test_a_file_added_or_removed_is_seen(project, tmp_path):
    cache_dir = tmp_path / "cache"
    not_hot = [(5, "PFL002")]  # nothing calls the helpers every step: the noqa is unused
    (project / "train.py").rename(project / "train.txt")
    assert _codes(_check(".", cache_dir=cache_dir)) == not_hot
    (project / "train.txt").rename(project / "train.py")  # same content and inode: only the set of files tells
    assert _codes(_check("helpers.py", cache_dir=cache_dir)) == [(2, "PFL201")]
    (project / "train.py").unlink()
    assert _codes(_check("helpers.py", cache_dir=cache_dir)) == not_hot


def test_a_changed_setting_is_seen(project, tmp_path):
    cache_dir = tmp_path / "cache"
    assert len(_check(".", cache_dir=cache_dir)) == 1
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\n[tool.perflint]\nignore = ["PFL201"]\n')
    assert _check(".", cache_dir=cache_dir) == []


def test_a_corrupt_snapshot_is_ignored_and_replaced(project, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    full = _check(".", cache_dir=cache_dir)
    [snapshot] = (cache_dir).glob("*/projects/*.json")
    for garbage in (b"", b"{not json", b'{"format": 1, "signature": 3}', snapshot.read_bytes()[:-40]):
        snapshot.write_bytes(garbage)
        assert _check(".", cache_dir=cache_dir) == full
    _no_project_pass(monkeypatch)
    assert _check(".", cache_dir=cache_dir) == full


def test_files_written_moments_ago_are_never_served_from_a_snapshot(project, tmp_path, monkeypatch):
    """A file rewritten within the file system's timestamp tick keeps its stat: until its
    stat is old enough to be trusted, the snapshot is neither written nor used."""
    monkeypatch.setattr(cache_module, "RACY_NS", 3_000_000_000)
    cache_dir = tmp_path / "cache"
    assert len(_check(".", cache_dir=cache_dir)) == 1
    assert not list(cache_dir.glob("*/projects/*.json"))


def test_fixing_a_file_named_alone_after_a_served_run_keeps_its_cross_file_suppression(project, tmp_path,
                                                                                        monkeypatch):
    """`perflint fix helpers.py` (the pre-commit fix hook) must know from the snapshot that
    helpers.py runs every step, or it deletes the `# noqa` as unused."""
    cache_dir = tmp_path / "cache"
    _check(".", cache_dir=cache_dir)
    _no_project_pass(monkeypatch)
    fix_paths([Path("helpers.py")], SettingsResolver(Path.cwd()), jobs=1, cache=Cache.open(cache_dir))
    assert (project / "helpers.py").read_text().count("# noqa: PFL201") == 1


def test_the_cli_twice_gives_the_same_output(project, tmp_path):
    cache_dir = str(tmp_path / "cache")
    first = CliRunner().invoke(main, ["check", "--cache-dir", cache_dir, "--output-format", "full", "."])
    second = CliRunner().invoke(main, ["check", "--cache-dir", cache_dir, "--output-format", "full", "."])
    assert first.exit_code == second.exit_code == 1
    assert "helpers.py:2:" in first.output and first.output == second.output


def test_snapshots_unused_for_a_month_are_pruned_with_the_entries(project, tmp_path):
    cache_dir = tmp_path / "cache"
    _check(".", cache_dir=cache_dir)
    [used] = cache_dir.glob("*/projects/*.json")
    stale = used.with_name("0" * 32 + ".json")
    stale.write_text("{}")
    os.utime(stale, (1_000_000_000, 1_000_000_000))  # 2001
    cache_module.prune(cache_dir, keep_version=cache_module.__version__, now=time.time())
    assert used.exists() and not stale.exists()
