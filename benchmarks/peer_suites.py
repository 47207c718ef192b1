#!/usr/bin/env python3
"""Peer suites: do real libraries' own tests still pass after `perflint fix --unsafe-fixes`?

    python benchmarks/peer_suites.py                         # every configured library
    python benchmarks/peer_suites.py --library gpytorch --work /tmp/peers --keep
    python benchmarks/peer_suites.py --library timm --json out.json --markdown out.md

Run it with the interpreter perflint is installed in. For each library it:

1. takes the release's sdist (`pip download --no-deps --no-binary :all: NAME==VERSION`, or
   `--source PATH`: a local sdist or an unpacked source tree) and unpacks a fresh copy into
   `WORK/NAME/src`;
2. makes a dedicated virtual environment `WORK/venvs/NAME` with `torch==2.13.0` (`--torch`),
   then the release's runtime requirements (its `PKG-INFO` `Requires-Dist` without extras,
   torch left out) plus the configured test requirements, all under a constraints file that
   pins torch (`-c`), so no requirement can replace it; the library itself goes in with
   `--no-deps`. The tests import the unpacked tree (`PYTHONPATH`), which the run checks.
   `--python PY` skips this step and uses that interpreter as it is;
3. runs the configured subset of the library's tests (`pytest -p no:cacheprovider -q
   --junitxml=...`) and records each test id's outcome (passed / failed / error / skipped);
4. applies `perflint fix --unsafe-fixes` to the library's package (never its tests, nor
   test helpers shipped inside the package: `exclude`), with the fixes listed per rule
   (`--show-fixes`) and per finding (`check --output-format json` before the fix: rule,
   file:line, the line before and after), and the whole diff saved as `WORK/NAME/fix.diff`
   (`--fix-test-helpers` fixes the excluded test helpers too);
5. reruns the same tests and compares per test id: a *regression* is a test that passed
   before and failed or errored after. Each regression lists the applied fixes whose
   rewritten lines its traceback passes through (`suspects`): the first candidates for its
   cause. Every test's outcome before and after is kept in `WORK/NAME/outcomes.json`.

It writes `WORK/summary.json` and `WORK/summary.md` (or `--json`/`--markdown`). The exit
status is 1 when any library has a regression, 2 when the harness itself fails (a download,
an install, or a test run that produced no report). `WORK` is a temporary directory removed at
the end unless `--work DIR` or `--keep` is given; virtual environments in a kept `WORK` are
reused by later runs (delete `WORK/venvs/NAME` to rebuild one).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"


@dataclass
class Library:
    """One peer suite: which release, which tests, what perflint may fix."""

    name: str
    spec: str  # NAME==VERSION, what `pip download` fetches
    package: str  # the import package below the source root that perflint fixes
    tests: list[str]  # pytest arguments (files or node ids), relative to the source root
    exclude: list[str] = field(default_factory=list)  # globs perflint leaves alone (test helpers)
    requirements: list[str] = field(default_factory=list)  # test-only extras (pytest is always added)
    pins: list[str] = field(default_factory=list)  # constraints besides torch, for reproducible runs
    skip_requirements: list[str] = field(default_factory=list)  # Requires-Dist names not installed
    pytest_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # environment of the test runs
    timeout: int = 900  # seconds per test run

    @property
    def version(self) -> str:
        return self.spec.split("==", 1)[1] if "==" in self.spec else ""


# Test subsets: as much of each shipped suite as runs in about a minute or two on two shared
# CPU cores without a network, always including the tests of the modules the fixes touch.
LIBRARIES: dict[str, Library] = {
    "gpytorch": Library(
        name="gpytorch",
        spec="gpytorch==1.15.2",
        package="gpytorch",
        tests=["test"],  # the whole suite the sdist ships: about 2,300 tests
        exclude=["gpytorch/test"],  # base test cases shipped inside the package
        pins=["linear_operator==0.6.1"],
    ),
    "timm": Library(
        name="timm",
        spec="timm==1.0.31",
        package="timm",
        tests=["tests/test_models.py",  # only edgenext's (models/edgenext.py is fixed): the rest takes hours
               "tests/test_layers.py", "tests/test_layers_drop.py", "tests/test_layers_pool.py",
               "tests/test_layers_pos_embed.py", "tests/test_data.py", "tests/test_naflex_dataset.py",
               "tests/test_scheduler.py", "tests/test_utils.py", "tests/test_input_conv.py",
               "tests/test_dataset_info.py", "tests/test_task.py", "tests/test_checkpoint_saver.py"],
        # pretrained weights need the network; test_optim and test_multilabel take minutes, and
        # test_train_resume/test_sweep* import scripts the sdist does not ship
        pytest_args=["-k", "(edgenext and not pretrained) or not test_models"],
        requirements=["expecttest"],  # torch.testing._internal imports it
        env={"HF_HUB_OFFLINE": "1"},  # no hub downloads (they hang without a network)
    ),
    "linear_operator": Library(
        name="linear_operator",
        spec="linear_operator==0.6.1",
        package="linear_operator",
        tests=["test"],
        exclude=["linear_operator/test"],  # base test cases shipped inside the package
    ),
}


# --------------------------------------------------------------------------- helpers
def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class HarnessError(RuntimeError):
    """The harness could not produce a result (download, install, a test run without a report)."""


def run(command: list[str], *, cwd: Path | None = None, env: dict | None = None, timeout: int | None = None,
        check: bool = True, log_file: Path | None = None) -> subprocess.CompletedProcess:
    """Run `command`; its output goes to `log_file` when given (appended), else is captured."""
    log("$ " + " ".join(command))
    done = subprocess.run(command, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, check=False)
    if log_file is not None:
        with log_file.open("a", encoding="utf-8") as handle:
            handle.write(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}\n[exit {done.returncode}]\n")
    if check and done.returncode != 0:
        raise HarnessError(f"{' '.join(command)} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return done


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return _canonical(match.group(1)) if match else ""


def runtime_requirements(pkg_info: str, skip: list[str] = ()) -> list[str]:
    """The `Requires-Dist` lines of a PKG-INFO that are not behind an extra, without torch
    (which the environment already has, pinned) and without the names in `skip`."""
    leave_out = {"torch"} | {_canonical(s) for s in skip}
    found = []
    for line in pkg_info.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = line.split(":", 1)[1].strip()
        marker = requirement.split(";", 1)[1] if ";" in requirement else ""
        if "extra" in marker:
            continue
        if requirement_name(requirement) in leave_out:
            continue
        found.append(requirement)
    return found


# --------------------------------------------------------------------------- sources
def download_sdist(spec: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    name, version = spec.split("==")
    def existing() -> list[Path]:
        stems = {name, name.replace("-", "_"), name.replace("_", "-"), _canonical(name).replace("-", "_")}
        return sorted(p for stem in stems for p in directory.glob(f"{stem}-{version}.tar.gz"))
    if not existing():
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
             "-d", str(directory), spec])
    found = existing()
    if not found:
        raise HarnessError(f"no sdist for {spec} in {directory}")
    return found[0]


def unpack(source: Path, dest: Path) -> Path:
    """A fresh copy of the source tree (an sdist's top directory dropped) in `dest`."""
    if dest.exists():
        shutil.rmtree(dest)
    if source.is_dir():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
        return dest
    dest.mkdir(parents=True)
    if source.name.endswith(".zip"):
        with zipfile.ZipFile(source) as zipped:
            for member in zipped.infolist():
                inner = member.filename.split("/", 1)[-1] if "/" in member.filename else ""
                if inner and not member.is_dir() and _safe(inner):
                    target = dest / inner
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zipped.read(member))
        return dest
    with tarfile.open(source) as tarred:
        for member in tarred.getmembers():
            inner = member.name.split("/", 1)[-1] if "/" in member.name else ""
            if inner and member.isfile() and _safe(inner):
                target = dest / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tarred.extractfile(member)
                if handle is not None:
                    target.write_bytes(handle.read())
                    if member.mode & 0o111:
                        target.chmod(0o755)
    return dest


def _safe(inner: str) -> bool:
    parts = Path(inner).parts
    return not Path(inner).is_absolute() and ".." not in parts


# --------------------------------------------------------------------------- environment
def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def make_environment(lib: Library, src: Path, venvs: Path, torch_spec: str, log_file: Path) -> Path:
    """The interpreter of `venvs/NAME`, made (or reused when its marker says it is complete)."""
    venv = venvs / lib.name
    python = venv_python(venv)
    marker = venv / "peer-suite-ready"
    constraints = venvs / f"{lib.name}-constraints.txt"
    constraints.parent.mkdir(parents=True, exist_ok=True)
    constraints.write_text("\n".join([torch_spec, *lib.pins]) + "\n")
    if not (python.exists() and marker.exists() and marker.read_text() == _fingerprint(lib, torch_spec)):
        if venv.exists():
            shutil.rmtree(venv)
        run([sys.executable, "-m", "venv", str(venv)], log_file=log_file)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        run(pip + [torch_spec], log_file=log_file)
        pkg_info = src / "PKG-INFO"
        requirements = runtime_requirements(pkg_info.read_text(encoding="utf-8") if pkg_info.exists() else "",
                                            lib.skip_requirements)
        run(pip + ["-c", str(constraints), *requirements, "pytest", *lib.requirements], log_file=log_file)
        run(pip + ["-c", str(constraints), "--no-deps", str(src)], log_file=log_file)
        shim_torchvision(python, log_file)
        marker.write_text(_fingerprint(lib, torch_spec))
    return python


TORCHVISION_SHIM = '''"""Written by perflint's benchmarks/peer_suites.py. PyPI's Linux torchvision wheels are CUDA
builds whose C++ ops cannot load with a CPU torch; torchvision then imports without its ops,
except for its unguarded `torch.library.register_fake("torchvision::nms")` (and `qnms`), which
need the ops. When (and only when) the ops did not load, those registrations are skipped so
that `import torchvision` works; calling `torchvision.ops.nms` still fails."""
import importlib.abc
import importlib.util
import sys


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision.extension":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            if not module._has_ops():
                import torch

                register_fake = torch.library.register_fake

                def tolerant(op, *args, **kwargs):
                    if isinstance(op, str) and op.startswith("torchvision::"):
                        if not hasattr(torch.ops.torchvision, op.split("::", 1)[1].split(".")[0]):
                            return lambda fn=None: fn  # an op that did not load: nothing to register
                    return register_fake(op, *args, **kwargs)

                torch.library.register_fake = tolerant

        spec.loader.exec_module = patched
        return spec


sys.meta_path.insert(0, _Finder())
'''


def shim_torchvision(python: Path, log_file: Path) -> bool:
    """When torchvision is installed and cannot be imported because its C++ ops did not load
    (a CUDA wheel with a CPU torch: PyPI has no other Linux torchvision), install a start-up
    hook in the venv that lets it import without them (`TORCHVISION_SHIM`). True when it did."""
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torchvision') is None else 3)"
    if run([str(python), "-c", probe], check=False, log_file=log_file).returncode == 0:
        return False
    done = run([str(python), "-c", "import torchvision"], check=False, log_file=log_file)
    if done.returncode == 0 or "operator torchvision::" not in done.stderr:
        return False
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               log_file=log_file).stdout.strip()
    (Path(site) / "_peer_suites_torchvision_shim.py").write_text(TORCHVISION_SHIM, encoding="utf-8")
    (Path(site) / "_peer_suites_torchvision_shim.pth").write_text("import _peer_suites_torchvision_shim\n")
    run([str(python), "-c", "import torchvision"], log_file=log_file)
    log("torchvision: CUDA wheel without its ops on a CPU torch; installed the import shim")
    return True


def _fingerprint(lib: Library, torch_spec: str) -> str:
    return json.dumps([lib.spec, torch_spec, lib.pins, lib.requirements, lib.skip_requirements, 1])


def environment_versions(python: Path, lib: Library, src: Path, log_file: Path) -> dict:
    """Python, torch and the library's version, and where the library is imported from (it
    must be the unpacked tree, which perflint fixes, not a copy in site-packages)."""
    code = ("import json, sys, importlib.metadata as m, {pkg}\n"
            "def v(n):\n"
            "    try: return m.version(n)\n"
            "    except Exception: return None\n"
            "torch = sys.modules.get('torch')\n"
            "print(json.dumps({{'python': sys.version.split()[0], 'torch': torch and torch.__version__, "
            "'file': {pkg}.__file__, 'packages': {{n: v(n) for n in {names!r}}}}}))").format(
        pkg=lib.package, names=sorted({lib.name, "torchvision", *(requirement_name(p) for p in lib.pins)}))
    done = run([str(python), "-c", code], cwd=src, env=_test_env(src, lib.env), log_file=log_file)
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(info["file"]).resolve().is_relative_to(src.resolve()):
        raise HarnessError(f"{lib.package} is imported from {info['file']}, not from the unpacked {src}")
    info["file"] = os.path.relpath(info["file"], src)
    shimmed = any((python.parent.parent / "lib").glob("*/site-packages/_peer_suites_torchvision_shim.pth"))
    info["shims"] = ["torchvision-without-ops"] if shimmed else []
    return info


def _test_env(src: Path, extra: dict[str, str] | None = None) -> dict:
    env = dict(os.environ)
    env.update(extra or {})
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no stale .pyc next to the files the fix rewrites
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


# --------------------------------------------------------------------------- tests
OUTCOME_RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}


def parse_junit(path: Path) -> dict[str, str]:
    """Test id -> outcome from a pytest JUnit XML report. A test reported twice (a failure
    in the call and an error in teardown) keeps its worst outcome."""
    outcomes: dict[str, str] = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        tags = {child.tag for child in case}
        if "error" in tags:
            outcome = "error"
        elif "failure" in tags:
            outcome = "failed"
        elif "skipped" in tags:
            skipped = case.find("skipped")
            outcome = "xfailed" if skipped is not None and skipped.get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        previous = outcomes.get(test_id)
        if previous is None or OUTCOME_RANK[outcome] > OUTCOME_RANK[previous]:
            outcomes[test_id] = outcome
    return outcomes


def failure_messages(path: Path) -> dict[str, str]:
    """Test id -> its failure or error text (message and traceback)."""
    messages = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                text = (child.get("message") or "") + "\n" + (child.text or "")
                messages[f"{case.get('classname', '')}::{case.get('name', '')}"] = text.strip()
    return messages


HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,(?P<count>\d+))? @@")


def changed_lines(diff: str) -> dict[str, set[int]]:
    """File (as the diff's `b/` side names it) -> the lines of the fixed file the diff added."""
    changed: dict[str, set[int]] = {}
    current, row = None, 0
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[4:].removeprefix("b/")
            continue
        match = HUNK.match(line)
        if match:
            row = int(match.group("start"))
            continue
        if current is None or line.startswith("--- "):
            continue
        if line.startswith("+"):
            changed.setdefault(current, set()).add(row)
            row += 1
        elif line.startswith(" "):
            row += 1
    return changed


def suspects(traceback: str, changed: dict[str, set[int]], fixes: list[dict]) -> list[dict]:
    """The applied fixes whose rewritten lines a failure's traceback passes through
    (`path:LINE` in pytest's report): the first candidates for a regression's cause."""
    hits = []
    for name, rows in changed.items():
        for match in re.finditer(re.escape(name) + r"[\":, line]+(\d+)", traceback):
            row = int(match.group(1))
            if row in rows:
                hits.append((name, row))
    found = []
    for name, row in dict.fromkeys(hits):
        near = [f for f in fixes if f["file"] == name and f["applied"]]
        if near:
            fix = min(near, key=lambda f: abs(f["line"] - row))
            found.append({"code": fix["code"], "file": name, "line": fix["line"], "before": fix["before"],
                          "after": fix["after"], "traceback_line": row})
    return found


def run_tests(python: Path, lib: Library, src: Path, junit: Path, log_file: Path) -> dict:
    if junit.exists():
        junit.unlink()
    command = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "addopts=",
               f"--junitxml={junit}", *lib.pytest_args, *lib.tests]
    start = time.perf_counter()
    done = run(command, cwd=src, env=_test_env(src, lib.env), timeout=lib.timeout, check=False, log_file=log_file)
    seconds = time.perf_counter() - start
    if not junit.exists():
        raise HarnessError(f"pytest wrote no report (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    outcomes = parse_junit(junit)
    if not outcomes:
        raise HarnessError(f"pytest collected no tests (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return {"exit": done.returncode, "seconds": round(seconds, 1), "outcomes": outcomes,
            "counts": dict(sorted(Counter(outcomes.values()).items())), "failures": failure_messages(junit)}


def compare_outcomes(before: dict[str, str], after: dict[str, str]) -> dict:
    """Per test id: regressions (passed before, failed or errored after), fixed ones (the
    reverse), tests missing after, and new ones."""
    bad = {"failed", "error"}
    return {
        "regressions": sorted(t for t, o in before.items() if o == "passed" and after.get(t) in bad),
        "fixed": sorted(t for t, o in before.items() if o in bad and after.get(t) == "passed"),
        "missing_after": sorted(set(before) - set(after)),
        "new_after": sorted(set(after) - set(before)),
        "changed": sorted(t for t in before if t in after and before[t] != after[t]),
    }


# --------------------------------------------------------------------------- perflint
def perflint(args: list[str], src: Path, log_file: Path, check: bool = False) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "perflint", *args], cwd=src, check=check, log_file=log_file)


def _exclude_args(lib: Library) -> list[str]:
    return ["--extend-exclude", ",".join(lib.exclude)] if lib.exclude else []


def findings(lib: Library, src: Path, log_file: Path, out: Path) -> list[dict]:
    done = perflint(["check", "--unsafe-fixes", "--no-cache", "--exit-zero", "--output-format", "json",
                     "-o", str(out), *_exclude_args(lib), lib.package], src, log_file)
    if done.returncode != 0 or not out.exists():
        raise HarnessError(f"perflint check failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


SHOW_FIXES_FILE = re.compile(r"^- (?P<file>.+):$")
SHOW_FIXES_RULE = re.compile(r"^\s+(?P<count>\d+) × (?P<code>[A-Z]+\d+)")


def parse_show_fixes(text: str) -> dict[str, dict[str, int]]:
    """`perflint fix --show-fixes` listing -> {file: {code: count}}."""
    fixed: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        file_match = SHOW_FIXES_FILE.match(line)
        if file_match:
            current = file_match.group("file")
            continue
        rule_match = SHOW_FIXES_RULE.match(line)
        if rule_match and current is not None:
            fixed.setdefault(current, {})[rule_match.group("code")] = int(rule_match.group("count"))
    return fixed


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="surrogateescape")
            for p in sorted(root.rglob("*.py"))}


def offered_fixes(found: list[dict], before: dict[str, str], after: dict[str, str], package: str) -> list[dict]:
    """The findings that carried an applicable fix before fixing: rule, file:line, the line
    before, and the same line of the fixed file (a fix may reflow it: the whole diff is kept)."""
    listed = []
    for finding in found:
        fix = finding.get("fix")
        if not fix or fix.get("applicability") not in ("safe", "unsafe"):
            continue
        name = Path(finding["filename"]).as_posix()
        key = name[len(package) + 1:] if name.startswith(package + "/") else name
        row = finding["location"]["row"]
        old_lines = before.get(key, "").splitlines()
        new_lines = after.get(key, "").splitlines()
        listed.append({
            "code": finding["code"], "file": name, "line": row, "applicability": fix["applicability"],
            "message": fix.get("message", ""),
            "before": old_lines[row - 1].strip() if 0 < row <= len(old_lines) else "",
            "after": new_lines[row - 1].strip() if 0 < row <= len(new_lines) else "",
            "applied": before.get(key) != after.get(key),
        })
    return listed


def apply_fixes(lib: Library, src: Path, lib_work: Path, log_file: Path) -> dict:
    package_dir = src / lib.package
    before = snapshot(package_dir)
    found_before = findings(lib, src, log_file, lib_work / "findings-before.json")
    done = perflint(["fix", "--unsafe-fixes", "--show-fixes", "--no-cache", "--exit-zero",
                     *_exclude_args(lib), lib.package], src, log_file)
    if done.returncode != 0:
        raise HarnessError(f"perflint fix failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    after = snapshot(package_dir)
    found_after = findings(lib, src, log_file, lib_work / "findings-after.json")
    by_file = parse_show_fixes(done.stdout)
    per_rule: Counter = Counter()
    for counts in by_file.values():
        per_rule.update(counts)
    diff = "".join(
        "".join(difflib.unified_diff(before.get(name, "").splitlines(True), after.get(name, "").splitlines(True),
                                     f"a/{lib.package}/{name}", f"b/{lib.package}/{name}"))
        for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name))
    (lib_work / "fix.diff").write_text(diff, encoding="utf-8")
    changed = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
    return {
        "fixed_per_rule": dict(sorted(per_rule.items())),
        "fixed_total": sum(per_rule.values()),
        "fixed_per_file": by_file,
        "files_changed": [f"{lib.package}/{n}" for n in changed],
        "fixes": offered_fixes(found_before, before, after, lib.package),
        "findings_before": dict(sorted(Counter(f["code"] for f in found_before).items())),
        "findings_after": dict(sorted(Counter(f["code"] for f in found_after).items())),
        "diff_lines": sum(1 for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")),
    }


# --------------------------------------------------------------------------- one library
def run_library(lib: Library, work: Path, *, source: Path | None = None, python: Path | None = None,
                torch_spec: str = TORCH) -> dict:
    lib_work = work / lib.name
    lib_work.mkdir(parents=True, exist_ok=True)
    log_file = lib_work / "log.txt"
    log_file.write_text("")
    result: dict = {"library": lib.name, "spec": lib.spec, "tests_selected": lib.tests,
                    "pytest_args": lib.pytest_args, "exclude": lib.exclude}
    start = time.perf_counter()
    archive = source if source is not None else download_sdist(lib.spec, work / "downloads")
    result["source"] = str(archive)
    src = unpack(archive, lib_work / "src")
    if python is None:
        python = make_environment(lib, src, work / "venvs", torch_spec, log_file)
        result["environment"] = "venv " + str(python.parent.parent)
    else:
        result["environment"] = f"given interpreter {python}"
    result["versions"] = environment_versions(python, lib, src, log_file)
    log(f"{lib.name}: tests before fixing")
    before = run_tests(python, lib, src, lib_work / "junit-before.xml", log_file)
    log(f"{lib.name}: perflint fix --unsafe-fixes {lib.package}")
    result["fix"] = apply_fixes(lib, src, lib_work, log_file)
    log(f"{lib.name}: tests after fixing")
    after = run_tests(python, lib, src, lib_work / "junit-after.xml", log_file)
    comparison = compare_outcomes(before["outcomes"], after["outcomes"])
    result["before"] = {k: v for k, v in before.items() if k not in ("outcomes", "failures")}
    result["after"] = {k: v for k, v in after.items() if k not in ("outcomes", "failures")}
    result["tests_run"] = len(before["outcomes"])
    result["comparison"] = comparison
    changed = changed_lines((lib_work / "fix.diff").read_text(encoding="utf-8"))
    result["regressions"] = [{"test": t, "before": before["outcomes"][t], "after": after["outcomes"][t],
                              "message": _first_line(after["failures"].get(t, "")),
                              "suspects": suspects(after["failures"].get(t, ""), changed, result["fix"]["fixes"])}
                             for t in comparison["regressions"]]
    result["failing_before"] = {t: _first_line(before["failures"].get(t, ""))
                                for t, o in before["outcomes"].items() if o in ("failed", "error")}
    result["outcomes_changed"] = {t: [before["outcomes"][t], after["outcomes"][t]] for t in comparison["changed"]}
    (lib_work / "outcomes.json").write_text(json.dumps({"before": before["outcomes"], "after": after["outcomes"]},
                                                      indent=1, sort_keys=True) + "\n", encoding="utf-8")
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


# --------------------------------------------------------------------------- reports
def markdown(summary: dict) -> str:
    lines = ["# Peer suites", "",
             f"perflint {summary['perflint']}, {summary['platform']}, {summary['date']}.", "",
             ("| Library | Version | torch | Tests run | Passed before → after | Failed/error before → after | "
              "Fixes applied | Regressions |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary["libraries"]:
        if "error" in r:
            lines.append(f"| {r['library']} | {r.get('spec', '')} | | harness error | | | | |")
            continue
        b, a = r["before"]["counts"], r["after"]["counts"]
        bad_b = b.get("failed", 0) + b.get("error", 0)
        bad_a = a.get("failed", 0) + a.get("error", 0)
        rules = ", ".join(f"{c} ×{n}" for c, n in r["fix"]["fixed_per_rule"].items()) or "none"
        lines.append(f"| {r['library']} | {r['spec'].split('==')[-1]} | {r['versions']['torch']} | {r['tests_run']} | "
                     f"{b.get('passed', 0)} → {a.get('passed', 0)} | {bad_b} → {bad_a} | "
                     f"{r['fix']['fixed_total']} ({rules}) | {len(r['regressions'])} |")
    for r in summary["libraries"]:
        lines += ["", f"## {r['library']}", ""]
        if "error" in r:
            lines += ["Harness error:", "", "```", r["error"][-2000:], "```"]
            continue
        lines.append("Tests: " + " ".join(f"`{t}`" for t in r["tests_selected"])
                     + (f", pytest arguments `{' '.join(r['pytest_args'])}`" if r.get("pytest_args") else "") + ".")
        lines.append("")
        versions = r["versions"]
        packages = ", ".join(f"{n} {v}" for n, v in versions["packages"].items() if v)
        lines.append(f"Environment: Python {versions['python']}, torch {versions['torch']}, {packages}"
                     + (f"; shims: {', '.join(versions['shims'])}" if versions.get("shims") else "") + ".")
        lines.append("")
        before_counts, after_counts = r["fix"]["findings_before"], r["fix"]["findings_after"]
        lines.append("Findings per rule before → after the fix: " + ", ".join(
            f"{c} {before_counts.get(c, 0)} → {after_counts.get(c, 0)}"
            for c in sorted(set(before_counts) | set(after_counts))) + ".")
        lines.append("")
        lines.append(f"Before: {r['before']['counts']} ({r['before']['seconds']} s); "
                     f"after: {r['after']['counts']} ({r['after']['seconds']} s).")
        lines.append("")
        if r["fix"]["fixes"]:
            lines += ["| Rule | Where | Applied | Before | After |", "| --- | --- | --- | --- | --- |"]
            for f in r["fix"]["fixes"]:
                lines.append(f"| {f['code']} ({f['applicability']}) | {f['file']}:{f['line']} | "
                             f"{'yes' if f['applied'] else 'no'} | `{_cell(f['before'])}` | `{_cell(f['after'])}` |")
        else:
            lines.append("No fix applied.")
        if r["regressions"]:
            lines += ["", "Regressions:", ""]
            for reg in r["regressions"]:
                cause = "; ".join(f"{s['code']} at {s['file']}:{s['line']}" for s in reg["suspects"])
                lines.append(f"- `{reg['test']}`: {reg['before']} → {reg['after']}: {_cell(reg['message'])[:200]}"
                             + (f" (traceback passes through the fix: {cause})" if cause else ""))
        if r["failing_before"]:
            lines += ["", f"Failing before any fix ({len(r['failing_before'])}, not counted as regressions):", ""]
            for test, message in sorted(r["failing_before"].items())[:20]:
                lines.append(f"- `{test}`: {_cell(message)[:200]}")
    return "\n".join(lines) + "\n"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def perflint_version() -> str:
    sys.path.insert(0, str(REPO))
    try:
        import perflint
        return perflint.__version__
    except Exception:  # noqa: BLE001 - only for the report's header
        return "unknown"
    finally:
        sys.path.pop(0)


# --------------------------------------------------------------------------- main
def load_libraries(config: Path | None) -> dict[str, Library]:
    """The built-in libraries, plus (or replaced by) those of a JSON file: a list of objects
    with `Library`'s fields."""
    libraries = dict(LIBRARIES)
    if config is not None:
        for entry in json.loads(config.read_text(encoding="utf-8")):
            lib = Library(**entry)
            libraries[lib.name] = lib
    return libraries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", action="append", help="a configured library (repeatable; default: all)")
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (sources, venvs, reports)")
    parser.add_argument("--source", type=Path, help="a local sdist or source tree instead of downloading (one library)")
    parser.add_argument("--python", type=Path, help="run the tests with this interpreter as it is (no venv, no installs)")
    parser.add_argument("--torch", default=TORCH, help=f"the torch requirement of the venvs (default {TORCH})")
    parser.add_argument("--fix-test-helpers", action="store_true",
                        help="fix the test helpers shipped inside the package too (the libraries' `exclude`)")
    parser.add_argument("--config", type=Path, help="JSON list of extra library definitions (Library's fields)")
    parser.add_argument("--json", type=Path, help="summary JSON (default WORK/summary.json)")
    parser.add_argument("--markdown", type=Path, help="summary markdown (default WORK/summary.md)")
    args = parser.parse_args(argv)

    libraries = load_libraries(args.config)
    names = args.library or list(LIBRARIES)
    unknown = [n for n in names if n not in libraries]
    if unknown:
        parser.error(f"unknown library {', '.join(unknown)} (configured: {', '.join(libraries)})")
    if args.source is not None and len(names) != 1:
        parser.error("--source needs exactly one --library")

    temporary = args.work is None
    work = (Path(tempfile.mkdtemp(prefix="peer-suites-")) if temporary else args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    summary = {"perflint": perflint_version(), "platform": f"{platform.system()} {platform.machine()}, "
               f"Python {platform.python_version()}", "date": time.strftime("%Y-%m-%d"), "torch_spec": args.torch,
               "libraries": []}
    status = 0
    try:
        for name in names:
            lib = libraries[name]
            if args.fix_test_helpers:
                lib = dataclasses.replace(lib, exclude=[])
            try:
                result = run_library(lib, work, source=args.source.resolve() if args.source else None,
                                     python=args.python, torch_spec=args.torch)
            except (HarnessError, subprocess.TimeoutExpired, OSError) as error:
                log(f"{name}: harness error: {error}")
                result = {"library": name, "spec": lib.spec, "error": str(error)}
                status = max(status, 2)
            else:
                regressions = len(result["regressions"])
                log(f"{name}: {result['tests_run']} tests, {result['fix']['fixed_total']} fixes "
                    f"{result['fix']['fixed_per_rule']}, {regressions} regressions")
                if regressions:
                    status = max(status, 1)
            summary["libraries"].append(result)
        json_path = args.json or work / "summary.json"
        md_path = args.markdown or work / "summary.md"
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(markdown(summary), encoding="utf-8")
        print(markdown(summary))
        log(f"wrote {json_path} and {md_path}")
    finally:
        if temporary and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
