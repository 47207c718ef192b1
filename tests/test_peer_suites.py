"""benchmarks/peer_suites.py without the network: its parsing and comparing in-process, and the
whole pipeline (tests, `perflint fix --unsafe-fixes`, tests again, compare) on a tiny fake
library given with `--source`, run by this interpreter (`--python`, no venv)."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "peer_suites.py"


@pytest.fixture(scope="module")
def peers():
    spec = importlib.util.spec_from_file_location("peer_suites", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_suites"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("peer_suites", None)


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="t.test_a" name="test_ok" />
  <testcase classname="t.test_a" name="test_fails"><failure message="assert 0">boom</failure></testcase>
  <testcase classname="t.test_a" name="test_skip"><skipped type="pytest.skip" message="no" /></testcase>
  <testcase classname="t.test_a" name="test_xfail"><skipped type="pytest.xfail" message="x" /></testcase>
  <testcase classname="t.test_a" name="test_teardown"><failure message="f" /></testcase>
  <testcase classname="t.test_a" name="test_teardown"><error message="e" /></testcase>
</testsuite></testsuites>
"""


def test_parse_junit_keeps_the_worst_outcome(peers, tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    assert peers.parse_junit(path) == {
        "t.test_a::test_ok": "passed", "t.test_a::test_fails": "failed", "t.test_a::test_skip": "skipped",
        "t.test_a::test_xfail": "xfailed", "t.test_a::test_teardown": "error"}
    assert peers.failure_messages(path)["t.test_a::test_fails"].startswith("assert 0")


def test_compare_outcomes(peers):
    before = {"a": "passed", "b": "passed", "c": "failed", "d": "passed", "e": "skipped", "f": "passed"}
    after = {"a": "passed", "b": "error", "c": "passed", "d": "failed", "e": "failed", "g": "passed"}
    result = peers.compare_outcomes(before, after)
    assert result["regressions"] == ["b", "d"]  # not e: it did not pass before
    assert result["fixed"] == ["c"]
    assert result["missing_after"] == ["f"] and result["new_after"] == ["g"]


def test_runtime_requirements_leave_out_torch_and_extras(peers):
    pkg_info = textwrap.dedent("""\
        Name: x
        Requires-Dist: torch>=2.0
        Requires-Dist: scipy>=1.6.0
        Requires-Dist: Linear_Operator>=0.6.1
        Requires-Dist: numpy; python_version >= "3.8"
        Requires-Dist: pytest; extra == "test"
        Requires-Dist: sphinx<=6; extra == 'docs'
        """)
    assert peers.runtime_requirements(pkg_info) == ["scipy>=1.6.0", "Linear_Operator>=0.6.1",
                                                   'numpy; python_version >= "3.8"']
    assert peers.runtime_requirements(pkg_info, skip=["linear-operator"]) == ["scipy>=1.6.0",
                                                                             'numpy; python_version >= "3.8"']


def test_parse_show_fixes(peers):
    text = ("x.py:1:1: PFL201 ...\nFound 3 findings (3 fixed, 0 remaining).\nFixed 3 findings:\n"
            "- lib/a.py:\n    2 × PFL220 (tensor-equal)\n- lib/b.py:\n    1 × PFL101 (create-then-move)\n")
    assert peers.parse_show_fixes(text) == {"lib/a.py": {"PFL220": 2}, "lib/b.py": {"PFL101": 1}}


DIFF = """\
--- a/lib/k.py
+++ b/lib/k.py
@@ -8,4 +8,4 @@
 def f(x1, x2):
     a = 1
-    eq = torch.equal(x1, x2)
+    eq = (x1 == x2).all()
     return eq
"""


def test_regressions_name_the_fix_their_traceback_passes_through(peers):
    changed = peers.changed_lines(DIFF)
    assert changed == {"lib/k.py": {10}}
    fixes = [{"code": "PFL220", "file": "lib/k.py", "line": 10, "applied": True,
              "before": "eq = torch.equal(x1, x2)", "after": "eq = (x1 == x2).all()"},
             {"code": "PFL101", "file": "lib/other.py", "line": 3, "applied": True, "before": "", "after": ""}]
    traceback = "RuntimeError: The size of tensor a (2) must match\nlib/k.py:10: RuntimeError\nlib/k.py:9: in f"
    [suspect] = peers.suspects(traceback, changed, fixes)
    assert (suspect["code"], suspect["line"], suspect["traceback_line"]) == ("PFL220", 10, 10)
    assert peers.suspects("lib/k.py:9: in f", changed, fixes) == []


def test_unpack_drops_the_top_directory(peers, tmp_path):
    tree = tmp_path / "pkg-1.0"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("X = 1\n")
    (tree / "PKG-INFO").write_text("Name: pkg\n")
    archive = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tarred:
        tarred.add(tree, arcname="pkg-1.0")
    dest = peers.unpack(archive, tmp_path / "out")
    assert (dest / "pkg" / "__init__.py").read_text() == "X = 1\n" and (dest / "PKG-INFO").exists()


# torch only in a submodule that the tests read but do not import: no process imports torch
FAKE_INIT = '''\
def add(a, b):
    return a + b
'''

FAKE_MODULE = '''\
import torch
from torch import nn


class Masker(nn.Module):
    def forward(self, x):
        mask = torch.zeros(x.shape).to(device=x.device, dtype=torch.bool)
        return x.masked_fill(mask, 0.0)
'''

FAKE_TESTS = '''\
from pathlib import Path

import pytest

import fakelib


def test_add():
    assert fakelib.add(2, 3) == 5


def test_source_is_the_release():
    # passes before the fix and fails after it: a regression the harness must report
    assert ".to(device=x.device" in (Path(fakelib.__file__).parent / "masks.py").read_text()


def test_always_fails():
    assert fakelib.add(1, 1) == 3


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
'''


@pytest.mark.subprocess
def test_pipeline_on_a_fake_library(peers, tmp_path):
    release = tmp_path / "fakelib-0.1"
    (release / "fakelib").mkdir(parents=True)
    (release / "fakelib" / "__init__.py").write_text(FAKE_INIT)
    (release / "fakelib" / "masks.py").write_text(FAKE_MODULE)
    (release / "fakelib" / "tests").mkdir()
    (release / "fakelib" / "tests" / "__init__.py").write_text("")
    # a test helper inside the package, excluded from the fix like gpytorch/test
    (release / "fakelib" / "tests" / "helpers.py").write_text(FAKE_MODULE)
    (release / "tests").mkdir()
    (release / "tests" / "test_fake.py").write_text(FAKE_TESTS)
    (release / "PKG-INFO").write_text("Name: fakelib\nVersion: 0.1\nRequires-Dist: torch\n")
    config = tmp_path / "libs.json"
    config.write_text(json.dumps([{"name": "fakelib", "spec": "fakelib==0.1", "package": "fakelib",
                                   "tests": ["tests/test_fake.py"], "exclude": ["fakelib/tests"]}]))
    work = tmp_path / "work"

    status = peers.main(["--library", "fakelib", "--config", str(config), "--source", str(release),
                         "--python", sys.executable, "--work", str(work)])

    assert status == 1  # a regression
    summary = json.loads((work / "summary.json").read_text())
    [result] = summary["libraries"]
    assert result["tests_run"] == 4
    assert result["before"]["counts"] == {"failed": 1, "passed": 2, "skipped": 1}
    assert result["after"]["counts"] == {"failed": 2, "passed": 1, "skipped": 1}
    assert result["fix"]["fixed_per_rule"] == {"PFL101": 1}
    assert result["fix"]["files_changed"] == ["fakelib/masks.py"]  # not the excluded helper
    [fix] = result["fix"]["fixes"]
    assert (fix["code"], fix["file"], fix["line"], fix["applied"]) == ("PFL101", "fakelib/masks.py", 7, True)
    assert fix["after"] == "mask = torch.zeros(x.shape, device=x.device, dtype=torch.bool)"
    assert [r["test"] for r in result["regressions"]] == ["tests.test_fake::test_source_is_the_release"]
    assert list(result["failing_before"]) == ["tests.test_fake::test_always_fails"]
    assert result["versions"]["file"] == "fakelib/__init__.py"  # the unpacked tree, which was fixed
    assert "torch.zeros(x.shape).to(" in (release / "fakelib" / "masks.py").read_text()  # source untouched
    assert "+        mask = torch.zeros(x.shape, device=x.device" in (work / "fakelib" / "fix.diff").read_text()
    report = (work / "summary.md").read_text()
    assert "| fakelib | 0.1 |" in report and "PFL101 ×1" in report
    assert "`tests.test_fake::test_source_is_the_release`: passed → failed" in report
