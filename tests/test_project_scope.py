"""Project scope: a file's findings do not depend on which files were named.

The project root (nearest pyproject.toml or .git, or --project-root) is read whole for
summaries; only the named files are reported. pre-commit names only the staged files, so
this is what makes the hook, `--add-noqa`, unused-noqa (PFL002) and `fix` agree with a
full `check .`.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint.api import check_paths, fix_paths
from perflint.baseline import add_noqa_to_paths
from perflint.cli import main
from perflint.config import SettingsResolver
from perflint.project import find_project_root

REPO = Path(__file__).resolve().parent.parent
FIXTURE_PROJECTS = sorted(p for p in (REPO / "tests" / "fixtures" / "projects").glob("*") if p.is_dir())

HELPERS = """\
def log_metric(t):
    return t.item()
"""
TRAIN = """\
from helpers import log_metric
for x in loader:
    loss = model(x).sum(); loss.backward()
    log_metric(loss)
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _project(tmp_path: Path, files: dict[str, str], marker: str = "pyproject.toml") -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    if marker == ".git":
        (root / ".git").mkdir()
    else:
        (root / marker).write_text('[project]\nname = "proj"\n')
    _write(root, files)
    return root


def _findings(paths, **kw) -> set[tuple[str, int, str]]:
    report = check_paths([Path(p) for p in paths], SettingsResolver(Path.cwd()), jobs=1, cache=None, **kw)
    return {(Path(d.path).as_posix(), d.location.row, d.code) for d in report.diagnostics}


@pytest.mark.parametrize("marker", ["pyproject.toml", ".git"])
def test_a_helper_named_alone_is_hot_through_its_caller_in_another_file(tmp_path, monkeypatch, marker):
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": TRAIN}, marker)
    monkeypatch.chdir(root)
    assert find_project_root(Path("helpers.py")) == root
    assert _findings(["helpers.py"]) == {("helpers.py", 2, "PFL201")}
    assert _findings(["."]) == {("helpers.py", 2, "PFL201")}
    assert _findings(["train.py"]) == set()  # read for its calls, not reported


def test_without_a_project_marker_the_named_files_are_the_project(tmp_path, monkeypatch):
    _write(tmp_path, {"helpers.py": HELPERS, "train.py": TRAIN})
    monkeypatch.chdir(tmp_path)
    if find_project_root(tmp_path) is not None:
        pytest.skip("the temporary directory is inside a project")
    assert _findings(["helpers.py"]) == set()
    assert _findings(["helpers.py", "train.py"]) == {("helpers.py", 2, "PFL201")}
    # --project-root names the project explicitly
    assert _findings(["helpers.py"], project_root=tmp_path) == {("helpers.py", 2, "PFL201")}


def test_the_project_walk_respects_excludes_and_gitignore(tmp_path, monkeypatch):
    root = _project(tmp_path, {"helpers.py": HELPERS, "scratch/train.py": TRAIN, "build/train.py": TRAIN})
    (root / ".gitignore").write_text("scratch/\n")
    (root / ".git").mkdir()
    monkeypatch.chdir(root)
    # build/ is excluded by default and scratch/ by .gitignore: no caller is left
    assert _findings(["helpers.py"]) == set()
    (root / ".gitignore").write_text("")
    assert _findings(["helpers.py"]) == {("helpers.py", 2, "PFL201")}


def test_a_chain_of_helpers_across_many_files_reaches_a_fixpoint(tmp_path, monkeypatch):
    depth = 8  # more files than any fixed number of rounds would follow
    files = {"train.py": "from h0 import f0\nfor x in loader:\n    loss = model(x).sum()\n"
                         "    loss.backward()\n    f0(loss)\n"}
    for i in range(depth - 1):
        files[f"h{i}.py"] = f"from h{i + 1} import f{i + 1}\ndef f{i}(t):\n    return f{i + 1}(t)\n"
    files[f"h{depth - 1}.py"] = f"def f{depth - 1}(t):\n    return t.nonzero()\n"
    root = _project(tmp_path, files)
    monkeypatch.chdir(root)
    last = f"h{depth - 1}.py"
    assert {code for _, _, code in _findings([last])} == {"PFL211"}
    assert _findings([last]) == {f for f in _findings(["."]) if f[0] == last}


def test_noqa_of_a_cross_file_finding_is_used_kept_by_fix_and_added_by_add_noqa(tmp_path, monkeypatch):
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": TRAIN})
    monkeypatch.chdir(root)
    resolver = SettingsResolver(root)
    added = add_noqa_to_paths([Path("helpers.py")], resolver, jobs=1)
    assert added.added == 1
    suppressed = (root / "helpers.py").read_text()
    assert "# noqa: PFL201" in suppressed
    assert _findings(["helpers.py"]) == set()  # no unused-noqa (PFL002) either
    report = fix_paths([Path("helpers.py")], resolver, jobs=1)
    assert report.fixed == [] and (root / "helpers.py").read_text() == suppressed
    assert _findings(["."]) == set()


def test_cli_named_file_stdin_and_the_project_root_option(tmp_path, monkeypatch):
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": TRAIN})
    monkeypatch.chdir(root)
    runner = CliRunner()
    named = runner.invoke(main, ["check", "--no-cache", "helpers.py"])
    assert named.exit_code == 1 and "helpers.py:2:12: PFL201" in named.output
    piped = runner.invoke(main, ["check", "--no-cache", "-", "--stdin-filename", "helpers.py"], input=HELPERS)
    assert piped.exit_code == 1 and "helpers.py:2:12: PFL201" in piped.output
    alone = runner.invoke(main, ["check", "--no-cache", "--project-root", str(root / "sub"), "helpers.py"])
    assert alone.exit_code == 2  # a project root that does not exist is a usage error
    (root / "sub").mkdir()
    alone = runner.invoke(main, ["check", "--no-cache", "--project-root", "sub", "helpers.py"])
    assert alone.exit_code == 0, alone.output


def _consistency_cases() -> list[Path]:
    return [REPO / "examples", *FIXTURE_PROJECTS]


@pytest.mark.parametrize("project", _consistency_cases(), ids=lambda p: p.name)
def test_every_file_alone_reports_its_part_of_the_whole_run(project, monkeypatch):
    """`check FILE` == FILE's part of `check .`, for every file of real-shaped projects."""
    monkeypatch.chdir(project)
    whole = check_paths([Path(".")], SettingsResolver(project), jobs=1, cache=None)
    by_file: dict[str, list] = {}
    for d in whole.diagnostics:
        by_file.setdefault(d.path, []).append(d.to_json())
    files = sorted(p.relative_to(project).as_posix() for p in project.rglob("*.py")
                   if "fixed" not in p.parts and p.name != "train_fixed.py")
    assert files
    for name in files:
        alone = check_paths([Path(name)], SettingsResolver(project), jobs=1, cache=None)
        got = [d.to_json() for d in alone.diagnostics]
        assert json.dumps(got, sort_keys=True) == json.dumps(by_file.get(name, []), sort_keys=True), name


def test_a_warm_run_reads_no_file_even_across_files(tmp_path, monkeypatch):
    """The seeded result of a helper is cached under its content hash and its seeds: a warm
    run finds it from the index without reading or analyzing the file again."""
    from perflint import api
    from perflint.cache import Cache

    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": TRAIN, "other.py": "import torch\n"})
    monkeypatch.chdir(root)
    monkeypatch.setattr("perflint.cache.RACY_NS", 0)  # files just written count as settled
    cache_dir = tmp_path / "cache"

    def run(paths):
        report = check_paths([Path(p) for p in paths], SettingsResolver(root), jobs=1, cache=Cache.open(cache_dir))
        return {(d.path, d.location.row, d.code) for d in report.diagnostics}

    assert run(["."]) == {("helpers.py", 2, "PFL201")}
    linted, read = [], []
    real_lint, real_read = api.lint_target, Cache.lint
    monkeypatch.setattr(api, "lint_target", lambda *a, **k: linted.append(a[0].path.name) or real_lint(*a, **k))
    monkeypatch.setattr(Cache, "lint", lambda self, t, *a, **k: read.append(t.path.name) or real_read(self, t, *a, **k))
    assert run(["helpers.py"]) == {("helpers.py", 2, "PFL201")}
    assert run(["."]) == {("helpers.py", 2, "PFL201")}
    assert linted == [] and read == []
    (root / "train.py").write_text(TRAIN.replace("log_metric(loss)", "pass"))
    assert run(["helpers.py"]) == set()  # the caller changed: the helper is no longer hot
    assert linted == ["train.py"]


def test_a_notebook_of_the_project_makes_a_helper_hot(tmp_path, monkeypatch):
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["from helpers import log_metric\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["for x in loader:\n", "    loss = model(x).sum(); loss.backward()\n", "    log_metric(loss)\n"]},
    ]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    root = _project(tmp_path, {"helpers.py": HELPERS, "explore.ipynb": json.dumps(notebook)})
    monkeypatch.chdir(root)
    assert _findings(["helpers.py"]) == {("helpers.py", 2, "PFL201")}
    assert _findings(["explore.ipynb"]) == set()


def test_the_call_chain_says_why_a_helper_in_another_file_runs_every_step(tmp_path, monkeypatch):
    root = _project(tmp_path, {
        "engine.py": """\
            from matching import assign_targets


            def train_one_epoch(model, loader, opt):
                for images, targets in loader:
                    loss = assign_targets(model(images), targets)
                    loss.backward()
                    opt.step()
            """,
        "matching.py": """\
            import torch
            from layers import nonzero_tuple


            def assign_targets(out, target):
                keep = nonzero_tuple(out > 0)
                return out.sum()
            """,
        "layers.py": """\
            def nonzero_tuple(x):
                return x.nonzero().unbind(1)
            """,
    })
    monkeypatch.chdir(root)
    expected = ["engine.py:5 loop over batches in `train_one_epoch`", "engine.py:6 calls `matching.assign_targets`",
                "matching.py:6 calls `layers.nonzero_tuple`"]
    for named in (["layers.py"], ["."]):
        report = check_paths([Path(p) for p in named], SettingsResolver(root), jobs=1, cache=None)
        (finding,) = [d for d in report.diagnostics if d.path == "layers.py"]
        assert finding.code == "PFL211" and finding.extra["hot_path"] == expected
        assert "hot_seed" not in finding.extra
    runner = CliRunner()
    full = runner.invoke(main, ["check", "--no-cache", "--output-format", "full", "layers.py"])
    assert "note: runs every step: engine.py:5 loop over batches in `train_one_epoch`" in full.output
    assert "-> matching.py:6 calls `layers.nonzero_tuple`" in full.output
    as_json = json.loads(runner.invoke(main, ["check", "--no-cache", "--output-format", "json", "layers.py"]).output)
    assert as_json[0]["hot_path"] == expected


def test_sources_copied_into_run_output_directories_are_not_read(tmp_path, monkeypatch):
    # Pointnet2-style: the training script copies its model files into log/<run>/ as a
    # record; those copies never run, so their forward is not per-step code.
    model = """\
    import torch
    class Net(torch.nn.Module):
        def forward(self, x):
            return x[torch.arange(2)].sum().item()
    """
    root = _project(tmp_path, {"models/net.py": model, "log/run1/net.py": model, "logs/run2/net.py": model,
                               "experiments/net.py": model})
    monkeypatch.chdir(root)
    found = {path for path, _row, _code in _findings(["."])}
    assert found == {"models/net.py", "experiments/net.py"}
    # named explicitly, a copy is still checked (as ruff does without --force-exclude)
    assert {path for path, _row, _code in _findings(["log/run1/net.py"])} == {"log/run1/net.py"}
