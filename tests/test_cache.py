"""The results cache and parallel runs: same findings with and without them, invalidation,
corruption, concurrency, `perflint clean`."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint import api, cache as cache_module, parallel
from perflint.api import check_paths, fix_paths
from perflint.cache import CACHEDIR_TAG, Cache, code_fingerprint
from perflint.cli import main
from perflint.config import Overrides, SettingsResolver
from perflint.files import Target
from perflint.rule import Rule
from perflint.types import Applicability, Diagnostic, Edit, Fix, Location

HOT_ITEM = """\
import torch

def train(model, loader, criterion):
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        total += loss.item()
        if loss > {limit}:
            break
    return total
"""

MODULE_SYNCS = """\
import torch

class Net(torch.nn.Module):
    def forward(self, x):
        scale = x.abs().max().item()
        idx = torch.nonzero(x > scale)
        return x[x > 0] / scale
"""

CORPUS = Path("/tmp/corpora/torchvision")


def make_tree(root: Path, files: int = 24) -> Path:
    """A small project: files with findings, clean files, a syntax error, a nested package."""
    root.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        sub = root / ("pkg" if index % 3 else "") / ("deep" if index % 5 == 0 else "")
        sub.mkdir(parents=True, exist_ok=True)
        if index % 4 == 0:
            text = "x = 1\n" * (index + 1)
        elif index % 4 == 1:
            text = HOT_ITEM.format(limit=index)
        else:
            text = MODULE_SYNCS + f"\nVALUE = {index}\n" + "# padding\n" * (index * 50)
        (sub / f"mod_{index}.py").write_text(text)
    (root / "broken.py").write_text("def forward(self, x)\n    return x\n")
    return root


def findings(report) -> list[dict]:
    return [d.to_json() for d in report.diagnostics]


def check(root: Path, *, jobs: int = 1, cache_dir: Path | None = None, select=None):
    resolver = SettingsResolver(Path.cwd(), Overrides(select=select))
    cache = Cache.open(cache_dir) if cache_dir is not None else None
    return check_paths([root], resolver, jobs=jobs, cache=cache)


@pytest.fixture
def force_parallel(monkeypatch):
    """Use workers even for the tiny trees of these tests."""
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 2)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------- same findings
def _same_findings_every_way(root: Path, cache_dir: Path) -> list[dict]:
    reference = findings(check(root, jobs=1))
    assert findings(check(root, jobs=2)) == reference
    assert findings(check(root, jobs=1, cache_dir=cache_dir)) == reference  # cold, one process
    assert findings(check(root, jobs=2, cache_dir=cache_dir)) == reference  # warm
    shutil.rmtree(cache_dir)
    assert findings(check(root, jobs=2, cache_dir=cache_dir)) == reference  # cold, workers
    assert findings(check(root, jobs=1, cache_dir=cache_dir)) == reference  # warm, one process
    return reference


def test_same_findings_with_and_without_cache_and_workers(in_tmp, force_parallel):
    root = make_tree(in_tmp / "proj")
    reference = _same_findings_every_way(root, in_tmp / "cache")
    codes = {d["code"] for d in reference}
    assert {"PFL001", "PFL201"} <= codes, codes  # the tree really has findings to compare
    assert sum(1 for d in reference if d["code"] == "PFL001") == 1


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not unpacked")
def test_same_findings_on_real_files(in_tmp, force_parallel):
    files = sorted(CORPUS.rglob("*.py"))
    picked = [f for f in files if f.parent.name in ("detection", "models", "ops")][:24]
    root = in_tmp / "corpus"
    for file in picked:
        dest = root / file.relative_to(CORPUS)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, dest)
    reference = _same_findings_every_way(root, in_tmp / "cache")
    assert reference, "the copied files are expected to have findings"


def test_a_warm_run_does_not_lint_unchanged_files(in_tmp, monkeypatch):
    root = make_tree(in_tmp / "proj", files=8)
    cache_dir = in_tmp / "cache"
    first = findings(check(root, cache_dir=cache_dir))
    calls = []
    real = api.lint_target
    monkeypatch.setattr(api, "lint_target", lambda *a, **k: calls.append(a[0].path) or real(*a, **k))
    assert findings(check(root, cache_dir=cache_dir)) == first
    assert calls == []
    (root / "mod_1.py").write_text(HOT_ITEM.format(limit=12345))
    second = findings(check(root, cache_dir=cache_dir))
    assert calls == [root / "mod_1.py"]  # only the changed file
    assert second == findings(check(root))


_LIBCST_PROBE = """\
import sys
from perflint.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    print("exit", exit.code)
print("libcst loaded:", any(name.startswith("libcst.") for name in sys.modules))
"""


def _check_in_fresh_process(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _LIBCST_PROBE, "check", *args], capture_output=True,
                          text=True, check=True)
    return done.stdout.splitlines()[-2:]


@pytest.mark.subprocess
def test_libcst_is_imported_only_to_compute_a_fix(in_tmp):
    """Importing libcst costs more than a warm run; only a fixable finding may load it."""
    (in_tmp / "clean.py").write_text("import torch\n\ndef f(x):\n    return x + 1\n")
    (in_tmp / "fixable.py").write_text(
        "import torch\n\ndef f(loader):\n    for x in loader:\n        t = torch.zeros(3).cuda()\n")
    cache_dir = str(in_tmp / "cache")
    assert _check_in_fresh_process("clean.py", "--no-cache") == ["exit 0", "libcst loaded: False"]
    assert _check_in_fresh_process("fixable.py", "--cache-dir", cache_dir) == ["exit 1", "libcst loaded: True"]
    # warm: the cached result carries the fix, nothing is rewritten again
    assert _check_in_fresh_process("fixable.py", "--cache-dir", cache_dir) == ["exit 1", "libcst loaded: False"]


# --------------------------------------------------------------------------- invalidation
def test_content_change_with_same_size_and_mtime_is_seen(in_tmp, monkeypatch):
    monkeypatch.setattr(cache_module, "RACY_NS", 0)  # trust every stat: the stat must tell
    root = in_tmp / "proj"
    root.mkdir()
    target = root / "train.py"
    target.write_text(HOT_ITEM.format(limit=1))
    cache_dir = in_tmp / "cache"
    assert [d["location"]["row"] for d in findings(check(root, cache_dir=cache_dir))] == [7, 8]
    stat = os.stat(target)
    # Same size, mtime restored: only ctime (and the content) tell.
    target.write_text(HOT_ITEM.format(limit=2).replace("total += loss.item()", "total += loss.ite_()"))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(target).st_size == stat.st_size
    assert [d["location"]["row"] for d in findings(check(root, cache_dir=cache_dir))] == [8]


def test_racy_files_are_hashed_again_on_a_coarse_clock(in_tmp, monkeypatch):
    """On a file system with 1-second times and no ctime, a file rewritten within the same
    second keeps its stat; the index must not trust a stat taken that close to a write."""
    def coarse(st):
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns // 10**9 * 10**9, 0]

    monkeypatch.setattr(cache_module, "stat_key", coarse)
    root = in_tmp / "proj"
    root.mkdir()
    target = root / "train.py"
    target.write_text(HOT_ITEM.format(limit=1))
    cache_dir = in_tmp / "cache"
    assert len(findings(check(root, cache_dir=cache_dir))) == 2
    before = coarse(os.stat(target))
    target.write_text(HOT_ITEM.format(limit=1).replace("total += loss.item()", "total += loss.ite_()"))
    if coarse(os.stat(target)) != before:
        pytest.skip("the second write landed in the next second")
    assert len(findings(check(root, cache_dir=cache_dir))) == 1


def test_settings_change_is_a_different_key(in_tmp):
    root = make_tree(in_tmp / "proj", files=8)
    cache_dir = in_tmp / "cache"
    everything = findings(check(root, cache_dir=cache_dir))
    only_item = findings(check(root, cache_dir=cache_dir, select=("PFL201",)))
    assert only_item == [d for d in everything if d["code"] == "PFL201"]
    assert only_item != everything
    assert findings(check(root, cache_dir=cache_dir)) == everything


def test_per_file_ignores_change_results_and_keys(in_tmp):
    root = make_tree(in_tmp / "proj", files=8)
    cache_dir = in_tmp / "cache"
    everything = findings(check(root, cache_dir=cache_dir))
    resolver = SettingsResolver(Path.cwd(), Overrides(per_file_ignores=(("mod_1.py", ("PFL201",)),)))
    ignored = findings(check_paths([root], resolver, jobs=1, cache=Cache.open(cache_dir)))
    assert ignored == [d for d in everything if not (d["filename"].endswith("mod_1.py") and d["code"] == "PFL201")]
    assert ignored != everything


def _count_lints(cache: Cache, target: Target) -> int:
    calls = []

    def lint(t, raw):
        calls.append(raw)
        return api.lint_target(t, Path.cwd(), raw)

    cache.lint(target, "train.py", lint)
    return len(calls)


def test_version_or_code_change_is_a_different_key(in_tmp, monkeypatch):
    (in_tmp / "train.py").write_text(HOT_ITEM.format(limit=1))
    target = Target(Path("train.py"), SettingsResolver(in_tmp).default, explicit=True)
    assert _count_lints(Cache.open(in_tmp / "cache"), target) == 1
    assert _count_lints(Cache.open(in_tmp / "cache"), target) == 0  # found by content
    assert _count_lints(Cache.open(in_tmp / "cache", fingerprint="other code"), target) == 1
    before = code_fingerprint()
    monkeypatch.setattr(cache_module, "__version__", "9.9.9")
    code_fingerprint.cache_clear()
    try:
        assert code_fingerprint() != before
        assert _count_lints(Cache.open(in_tmp / "cache"), target) == 1
    finally:
        code_fingerprint.cache_clear()


def test_display_path_is_part_of_the_key(in_tmp):
    for name in ("a", "b"):
        (in_tmp / name).mkdir()
        (in_tmp / name / "train.py").write_text(HOT_ITEM.format(limit=1))
    cache_dir = in_tmp / "cache"
    first = findings(check(in_tmp / "a", cache_dir=cache_dir))
    second = findings(check(in_tmp / "b", cache_dir=cache_dir))
    assert {d["filename"] for d in first} == {os.path.join("a", "train.py")}
    assert {d["filename"] for d in second} == {os.path.join("b", "train.py")}


# --------------------------------------------------------------------------- robustness
def _entries(cache_dir: Path) -> list[Path]:
    return [p for p in cache_dir.rglob("*") if p.is_file() and p.parent.parent.name == "entries"]


def test_corrupt_entries_and_index_are_ignored_and_rewritten(in_tmp):
    root = make_tree(in_tmp / "proj", files=10)
    cache_dir = in_tmp / "cache"
    reference = findings(check(root, cache_dir=cache_dir))
    entries = _entries(cache_dir)
    assert len(entries) == 11
    for number, entry in enumerate(entries):
        data = entry.read_bytes()
        garbage = [b"", data[: len(data) // 2], b"\x00\xff" * 10, b'{"key": "x", "diagnostics": []}',
                   json.dumps({**json.loads(data), "diagnostics": [{"code": 1}]}).encode()]
        entry.write_bytes(garbage[number % len(garbage)])
    index = next(cache_dir.rglob("index.json"))
    index.write_bytes(b"not json")
    assert findings(check(root, cache_dir=cache_dir)) == reference
    for entry in _entries(cache_dir):
        assert json.loads(entry.read_bytes())["key"] == entry.name  # rewritten whole
    assert json.loads(index.read_bytes())["format"] == cache_module._INDEX_FORMAT
    assert findings(check(root, cache_dir=cache_dir)) == reference


def test_worker_crash_is_reported_and_not_cached(in_tmp, monkeypatch, force_parallel):
    root = make_tree(in_tmp / "proj", files=12)
    cache_dir = in_tmp / "cache"
    reference = findings(check(root))
    real = api.lint_target

    def crashing(target, cwd, raw=None, hot_functions=frozenset()):
        if target.path.name == "mod_2.py":
            os.kill(os.getpid(), signal.SIGKILL)
        return real(target, cwd, raw, hot_functions)

    monkeypatch.setattr(api, "lint_target", crashing)
    crashed = findings(check(root, jobs=2, cache_dir=cache_dir))
    bad = [d for d in crashed if d["filename"].endswith("mod_2.py")]
    assert len(bad) == 1 and bad[0]["code"] == "PFL001"
    assert "killed by SIGKILL" in bad[0]["message"]
    assert [d for d in crashed if not d["filename"].endswith("mod_2.py")] == \
        [d for d in reference if not d["filename"].endswith("mod_2.py")]
    monkeypatch.setattr(api, "lint_target", real)
    assert findings(check(root, jobs=2, cache_dir=cache_dir)) == reference


@pytest.mark.slow
@pytest.mark.subprocess
def test_concurrent_runs_share_a_cache_safely(in_tmp):
    root = make_tree(in_tmp / "proj", files=30)
    reference = findings(check(root))
    cache_dir = in_tmp / "cache"
    command = [sys.executable, "-m", "perflint", "check", str(root), "--cache-dir", str(cache_dir),
               "--output-format", "json", "--exit-zero", "-j", "2"]
    for _ in range(2):
        runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
        outputs = [run.communicate(timeout=120) for run in runs]
        for (out, err), run in zip(outputs, runs):
            assert run.returncode == 0, err.decode()
            assert sorted(json.loads(out), key=_key) == sorted(reference, key=_key)
    for entry in _entries(cache_dir):
        json.loads(entry.read_bytes())


def _key(d: dict) -> tuple:
    return (d["filename"], d["location"]["row"], d["location"]["column"], d["code"])


def _hammer(cache_dir: str, key: str, rounds: int, payload: int, writer: bool) -> int:
    from perflint.engine import FileResult

    cache = Cache(Path(cache_dir), fingerprint="f")
    expected = FileResult("x.py", [_diagnostic(i) for i in range(payload)], parsed=True)
    bad = 0
    for _ in range(rounds):
        if writer:
            cache.write_entry(key, expected)
        got = cache.read_entry(key)  # the entry exists throughout: a miss is a torn read
        if got is None or got.diagnostics != expected.diagnostics or got.path != "x.py":
            bad += 1
    return bad


def test_readers_never_see_a_partial_entry_while_others_write(in_tmp):
    import multiprocessing

    cache = Cache.open(in_tmp / "cache", fingerprint="f")
    key = "ab" + "0" * 30
    assert _hammer(str(cache.directory), key, 1, 200, True) == 0
    context = multiprocessing.get_context("fork" if parallel.fork_available() else "spawn")
    with context.Pool(4) as pool:
        args = [(str(cache.directory), key, 60, 200, index % 2 == 0) for index in range(4)]
        assert pool.starmap(_hammer, args) == [0, 0, 0, 0]
    leftovers = [p for p in (cache.entries / "ab").iterdir() if p.name != key]
    assert leftovers == []  # no temporary files left behind


def _diagnostic(i: int) -> Diagnostic:
    fix = Fix(Applicability.UNSAFE, "use x", (Edit(Location(i + 1, 1), Location(i + 1, 5), "new\ntext é"),))
    return Diagnostic("PFL201", "tensor-item", f"message {i} ü", "x.py", Location(i + 1, 2), Location(i + 1, 9),
                      fix=fix if i % 2 else None, noqa_row=i + 1, url="https://example.invalid")


def test_diagnostics_round_trip_through_json_with_fixes():
    for i in range(4):
        original = _diagnostic(i)
        back = Diagnostic.from_json(json.loads(json.dumps(original.to_json())))
        assert back == original
        assert back.fix == original.fix


# --------------------------------------------------------------------------- layout and CLI
def test_cache_dir_has_cachedir_tag_and_gitignore_at_the_project_root(in_tmp):
    project = in_tmp / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.perflint]\n")
    (project / "src" / "train.py").write_text(HOT_ITEM.format(limit=1))
    os.chdir(project / "src")
    result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 1, result.output
    cache_dir = project / ".perflint_cache"
    assert (cache_dir / "CACHEDIR.TAG").read_text() == CACHEDIR_TAG
    assert (cache_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not (project / "src" / ".perflint_cache").exists()


def test_no_cache_and_config_cache_false_write_nothing(in_tmp):
    (in_tmp / "train.py").write_text(HOT_ITEM.format(limit=1))
    assert CliRunner().invoke(main, ["check", ".", "--no-cache"]).exit_code == 1
    assert not (in_tmp / ".perflint_cache").exists()
    (in_tmp / "pyproject.toml").write_text("[tool.perflint]\ncache = false\n")
    assert CliRunner().invoke(main, ["check", "."]).exit_code == 1
    assert not (in_tmp / ".perflint_cache").exists()
    (in_tmp / "pyproject.toml").write_text('[tool.perflint]\ncache-dir = "build-cache/pl"\n')
    assert CliRunner().invoke(main, ["check", "."]).exit_code == 1
    assert (in_tmp / "build-cache" / "pl" / "CACHEDIR.TAG").is_file()
    result = CliRunner().invoke(main, ["check", ".", "--cache-dir", "elsewhere", "-j", "1"])
    assert result.exit_code == 1
    assert (in_tmp / "elsewhere" / "CACHEDIR.TAG").is_file()


def test_unwritable_cache_warns_and_still_lints(in_tmp):
    (in_tmp / "train.py").write_text(HOT_ITEM.format(limit=1))
    (in_tmp / "blocker").write_text("a file, not a directory")
    result = CliRunner().invoke(main, ["check", "train.py", "--cache-dir", "blocker/cache"])
    assert result.exit_code == 1
    assert "PFL201" in result.stdout
    assert "warning: cannot use the cache" in result.stderr


def test_clean_removes_caches_below_paths_and_the_configured_one(in_tmp):
    for where in (in_tmp, in_tmp / "a" / "b"):
        where.mkdir(parents=True, exist_ok=True)
        (where / "train.py").write_text(HOT_ITEM.format(limit=1))
        os.chdir(where)
        assert CliRunner().invoke(main, ["check", "."]).exit_code == 1
        assert (where / ".perflint_cache").is_dir()
    os.chdir(in_tmp)
    assert CliRunner().invoke(main, ["check", ".", "--cache-dir", "custom"]).exit_code == 1
    foreign = in_tmp / "not-ours"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("user data")
    result = CliRunner().invoke(main, ["clean", "--cache-dir", "custom"])
    assert result.exit_code == 0, result.output
    assert "Removing cache at" in result.output
    assert not (in_tmp / ".perflint_cache").exists()
    assert not (in_tmp / "a" / "b" / ".perflint_cache").exists()
    assert not (in_tmp / "custom").exists()
    result = CliRunner().invoke(main, ["clean", "--cache-dir", "not-ours"])
    assert result.exit_code == 0
    assert (foreign / "keep.txt").read_text() == "user data"  # not created by perflint: kept


def test_stale_entries_are_pruned(in_tmp):
    root = make_tree(in_tmp / "proj", files=6)
    cache_dir = in_tmp / "cache"
    check(root, cache_dir=cache_dir)
    entries = _entries(cache_dir)
    old = entries[0]
    ancient = 1_000_000_000  # 2001
    os.utime(old, (ancient, ancient))
    stray = old.parent / ".leftover.tmp"
    stray.write_text("{")
    os.utime(stray, (ancient, ancient))
    other_version = cache_dir / "0.0.1" / "entries"
    other_version.mkdir(parents=True)
    os.utime(cache_dir / "0.0.1", (ancient, ancient))
    removed = cache_module.prune(cache_dir, keep_version=cache_module.__version__, now=time.time())
    assert removed == 3
    assert not old.exists() and not stray.exists() and not (cache_dir / "0.0.1").exists()
    assert all(e.exists() for e in entries[1:])


# --------------------------------------------------------------------------- fixing
class _SlowCall(Rule):
    """Test-only rule with a safe fix: `slow_call(...)` -> `fast_call(...)`."""

    code = "PFL990"
    name = "test-slow-call"
    message = "slow_call"
    hot_only = False
    triggers = (b"slow_call",)

    def visit_Call(self, node: ast.Call, ctx) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "slow_call":
            fix = ctx.fix(Applicability.SAFE, "use fast_call", [ctx.replace(node.func, "fast_call")])
            ctx.report(node.func, fix=fix)


@pytest.fixture
def with_fixable_rule(monkeypatch):
    from perflint import config
    from perflint.registry import resolve_rules

    monkeypatch.setattr(config, "resolve_rules", lambda *a: [*resolve_rules(*a), _SlowCall])


def test_fix_never_serves_stale_diagnostics(in_tmp, with_fixable_rule, force_parallel):
    root = make_tree(in_tmp / "proj", files=8)
    for index in range(3):
        (root / f"fixme_{index}.py").write_text(textwrap.dedent("""\
            def f(x):
                return slow_call(x) + slow_call(2)
        """))
    cache_dir = in_tmp / "cache"
    resolver = SettingsResolver(Path.cwd())
    before = check_paths([root], resolver, jobs=2, cache=Cache.open(cache_dir))
    assert sum(d.code == "PFL990" for d in before.diagnostics) == 6
    fixed = fix_paths([root], SettingsResolver(Path.cwd()), jobs=2, cache=Cache.open(cache_dir))
    assert len(fixed.fixed) == 6
    assert "fast_call(x) + fast_call(2)" in (root / "fixme_0.py").read_text()
    assert [d.to_json() for d in fixed.diagnostics] == [d.to_json() for d in before.diagnostics if d.code != "PFL990"]
    after = check_paths([root], SettingsResolver(Path.cwd()), jobs=2, cache=Cache.open(cache_dir))
    assert findings(after) == findings(check_paths([root], SettingsResolver(Path.cwd()), jobs=1))
    assert not any(d.code == "PFL990" for d in after.diagnostics)
