"""`benchmarks/consistency.py`, `lint_speed.py` and `parse_floor.py`: the parts that need no download
and no subprocess (comparing findings, extracting archives, picking files, the table)."""

from __future__ import annotations

import ast
import importlib.util
import io
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


consistency = _load("consistency")
lint_speed = _load("lint_speed")

TRAIN = """import torch


def train(model, loader, opt):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        opt.step()
        print(loss.item())
"""


def _finding(path: str, code: str, row: int, column: int, message: str) -> dict:
    return {"filename": path, "code": code, "location": {"row": row, "column": column}, "message": message,
            "end_location": {"row": row, "column": column + 1}, "name": "x", "fix": None}


# --------------------------------------------------------------------------- consistency.py
def test_strip_chain_drops_only_a_trailing_reached_from_chain():
    base = "`.item()` copies a tensor value to the host and waits for the GPU every step"
    assert consistency.strip_chain(base) == base
    for suffix in (" (reached from `train` in train.py -> `step`)", "; reached from `main`",
                   ", Reached from a.py:3", " \u2014 reached from x"):
        assert consistency.strip_chain(base + suffix) == base
    assert consistency.strip_chain("the step is reached from nowhere") == "the step is"


def test_normalise_path(tmp_path):
    assert consistency.normalise_path("./pkg//mod.py") == "pkg/mod.py"
    assert consistency.normalise_path("pkg/sub/../mod.py") == "pkg/mod.py"
    assert consistency.normalise_path(str(tmp_path / "pkg" / "mod.py"), tmp_path) == "pkg/mod.py"


def test_by_file_and_compare_ignore_the_chain_and_path_spelling():
    whole = consistency.by_file([
        _finding("./a.py", "PFL201", 3, 5, "item every step (reached from `loop` in b.py)"),
        _finding("a.py", "PFL203", 7, 1, "cpu every step"),
        _finding("b.py", "PFL101", 1, 1, "tensor every step"),
    ])
    alone = consistency.by_file([
        _finding("a.py", "PFL201", 3, 5, "item every step"),
        _finding("a.py", "PFL206", 9, 2, "new"),
    ])
    assert set(whole) == {"a.py", "b.py"}
    lost, gained = consistency.compare(whole["a.py"], alone["a.py"])
    assert lost == [("PFL203", 7, 1, "cpu every step")]
    assert gained == [("PFL206", 9, 2, "new")]
    assert consistency.compare(whole["b.py"], set()) == ([("PFL101", 1, 1, "tensor every step")], [])
    assert consistency.describe(lost[0]) == "PFL203 7:1 cpu every step"


def test_sample_files_is_seeded_sorted_and_all_by_default():
    files = [f"m{i}.py" for i in range(50)][::-1]
    assert consistency.sample_files(files, 0, 0) == sorted(files)
    assert consistency.sample_files(files, 80, 0) == sorted(files)
    picked = consistency.sample_files(files, 10, 3)
    assert picked == sorted(picked) and len(set(picked)) == 10
    assert picked == consistency.sample_files(files, 10, 3)
    assert picked != consistency.sample_files(files, 10, 4)


def test_archives_are_found_under_the_normalised_name(tmp_path):
    for name in ("pyro_ppl-1.9.1-py3-none-any.whl", "pyro_ppl-1.9.1.tar.gz", "pyro_ppl-1.9.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"")
    found = consistency._archives(tmp_path, "pyro-ppl", "1.9.1")
    assert [p.name for p in found] == ["pyro_ppl-1.9.1-py3-none-any.whl", "pyro_ppl-1.9.1.tar.gz"]


def test_extract_sources_from_a_wheel_keeps_only_python_files(tmp_path):
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/data.json", "{}")
        archive.writestr("pkg-1.0.dist-info/METADATA", "")
        archive.writestr("pkg-1.0.dist-info/x.py", "")
    dest = tmp_path / "src"
    consistency.extract_sources(wheel, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "pkg/__init__.py", "pyproject.toml"]
    marker = (dest / "pyproject.toml").read_text().splitlines()
    assert all(line.startswith("#") for line in marker)  # no table: it only marks the project's root


def test_extract_sources_from_an_sdist_drops_the_top_directory_and_stays_inside(tmp_path):
    sdist = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in (("pkg-1.0/pkg/mod.py", b"x = 1\n"), ("pkg-1.0/setup.cfg", b""),
                           ("pkg-1.0/../evil.py", b""), ("pkg-1.0/tests/test_mod.py", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text))
    dest = tmp_path / "out" / "src"
    consistency.extract_sources(sdist, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "pkg/mod.py", "pyproject.toml", "tests/test_mod.py"]
    assert (dest / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert not (tmp_path / "out" / "evil.py").exists()


def test_check_project_reports_what_the_whole_run_has_and_the_alone_run_lacks(tmp_path, monkeypatch):
    """The in-process part on a two-file project; the whole run (a subprocess) is faked from
    the API's own findings, with a chain suffix added (ignored) and one extra finding (lost)."""
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "train.py").write_text(TRAIN)
    (project / "pkg" / "other.py").write_text("x = 1\n")
    (project / "pyproject.toml").write_text(consistency.ROOT_MARKER)
    from perflint.api import check_paths
    from perflint.config import SettingsResolver

    monkeypatch.chdir(project)
    real = [d.to_json() for d in check_paths([Path("pkg/train.py")], SettingsResolver(project), jobs=1,
                                               cache=None).diagnostics]
    assert real, "the fixture's `.item()` in a training loop should be found"
    faked = [{**d, "filename": "./" + d["filename"], "message": d["message"] + " (reached from `main` in run.py)"}
             for d in real] + [_finding("pkg/other.py", "PFL999", 1, 1, "only with the whole project")]
    monkeypatch.setattr(consistency, "whole_run", lambda root, out: (faked, 0.0))
    monkeypatch.chdir(tmp_path)

    data = consistency.check_project("proj", project, tmp_path / "whole.json", sample=0, seed=0)
    assert Path.cwd() == tmp_path
    assert (data["files"], data["checked_alone"], data["findings_whole"]) == (2, 2, len(real) + 1)
    assert data["files_differ"] == 1 and data["findings_lost_alone"] == 1 and data["findings_gained_alone"] == 0
    assert data["differences"] == [{"path": "pkg/other.py", "whole": 1, "alone": 0,
                                    "lost": [["PFL999", 1, 1, "only with the whole project"]], "gained": []}]
    assert data["api_whole_matches_cli"] is False  # the faked extra finding
    text = consistency.summary("proj==1", data, show=5)
    assert "alone-run differs for 1 files" in text and "pkg/other.py: 1 whole, 0 alone" in text
    assert "- PFL999 1:1 only with the whole project" in text


# --------------------------------------------------------------------------- lint_speed.py
def test_largest_files_are_deterministic(tmp_path):
    for name, size in (("b.py", 10), ("a.py", 10), ("c.py", 30), ("d.py", 5), ("e.txt", 99)):
        (tmp_path / name).write_bytes(b"x" * size)
    assert [p.name for p in lint_speed.largest_files(tmp_path, 3)] == ["c.py", "a.py", "b.py"]


def _run(wall: float, cpu: float, lines: int = 1000, files: int = 10) -> dict:
    return lint_speed.rates({"wall_s": wall, "cpu_s": cpu, "peak_tree_rss_mb": 50.0, "peak_process_rss_mb": 40.0,
                             "load_before": 1.0, "load_after": 1.2}, files, lines)


def test_table_has_the_ruff_column_and_the_five_file_row():
    data = {
        "files": 10, "lines": 1000,
        "runs": {"perflint_cold": _run(2.0, 3.0), "ruff": _run(0.5, 1.0),
                 "perflint_five_files": _run(0.3, 0.3, lines=100, files=5)},
        "touched_file": {"path": "a.py", "lines": 100, "alone_wall_s": 0.2},
        "five_files": {"paths": ["a.py"], "lines": 100, "findings": 1, "findings_in_whole_run": 2,
                       "same_findings_as_whole_run": False},
        "perflint_findings": {}, "perflint_crashes": 0,
        "ruff_findings": {"E501": 7, "D100": 2}, "ruff_findings_total": 9,
        "wall_vs_ruff": {"perflint_cold": 4.0}, "cpu_vs_ruff": {"perflint_cold": 3.0},
    }
    text = lint_speed.table({"corpora": {"demo": data}})
    header, _, cold, ruff, five = text.splitlines()[:5]
    assert "t/ruff" in header and "cpu/ruff" in header
    assert cold.split()[1] == "perflint_cold" and "4.0" in cold.split() and "3.0" in cold.split()
    assert ruff.split()[1] == "ruff" and five.split()[1] == "perflint_five_files"
    assert "ruff findings 9 (2 rules; most: E501 7, D100 2)" in text
    assert "five files (100 lines): 1 findings, 2 in the whole run (DIFFERENT)" in text


def test_canonical_ignores_key_order():
    assert lint_speed.canonical({"a": 1, "b": 2}) == lint_speed.canonical({"b": 2, "a": 1})


# --------------------------------------------------------------------------- parse_floor.py
parse_floor = _load("parse_floor")


def test_parse_floor_counts_files_lines_and_nodes_and_skips_broken_files(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\ny = x + 2\n")
    (tmp_path / "b.py").write_text("def f(:\n")  # a syntax error: read, not parsed
    (tmp_path / "notes.txt").write_text("x = 1\n")
    found = parse_floor.measure(tmp_path)
    assert (found["files"], found["lines"]) == (2, 3)
    assert found["nodes"] == sum(1 for _ in ast.walk(ast.parse("x = 1\ny = x + 2\n")))
    assert found["parse_s"] >= 0 and found["walk_s"] >= 0
