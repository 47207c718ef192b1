"""Without torch installed: the linter, `check --trace` and the docs generation work, and
`bench` / `trace` say how to install it (the README's command) and exit 2, without a
traceback. One fresh interpreter with torch hidden checks all of it: a process start costs
more than every check in it (tests that start processes are kept few; see conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_trace_join import setup, site

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    sys.modules["torch"] = None  # `import torch` raises ImportError from here on
    from click.testing import CliRunner
    from perflint.cli import main

    out = {}
    def run(name, args):
        result = CliRunner().invoke(main, args)
        crashed = result.exception if not isinstance(result.exception, SystemExit) else None
        out[name] = {"code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                     "crash": repr(crashed) if crashed else None}

    run("check", ["check", "--no-cache", "loop.py"])
    run("check --trace", ["check", "--no-cache", "train.py", "--trace", "t.json", "--output-format", "json",
                          "--ignore", "PFL002"])
    run("bench", ["bench", "--device", "cpu"])
    run("trace", ["trace", "x.py"])
    from perflint.docs import generated_files
    out["docs"] = sorted(p.name for p in generated_files(Path(sys.argv[1]) / "docs"))
    out["torch imported"] = sys.modules.get("torch") is not None
    print(json.dumps(out))
    """)


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("no_torch")
    (work / "loop.py").write_text("for x, y in loader:\n    loss = criterion(model(x), y)\n    total += loss.item()\n")
    train = work / "train.py"
    setup(work, [site(train, 5), site(train, 6)])
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], cwd=work, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


pytestmark = pytest.mark.subprocess


def test_the_linter_works(without_torch):
    check = without_torch["check"]
    assert check["code"] == 1 and "PFL201" in check["stdout"] and check["crash"] is None


def test_check_trace_works(without_torch):
    joined = without_torch["check --trace"]
    assert joined["code"] == 1, joined
    assert [d["code"] for d in json.loads(joined["stdout"])] == ["PFL201", "PFL901"]


@pytest.mark.parametrize("command", ["bench", "trace"])
def test_bench_and_trace_print_the_readmes_install_command(without_torch, command):
    result = without_torch[command]
    assert result["code"] == 2 and result["crash"] is None, result
    assert f"perflint {command} needs PyTorch" in result["stderr"]
    assert 'pip install torch==2.13.0 && pip install ".[bench]"' in result["stderr"]
    assert "--index-url" not in result["stderr"] and "Traceback" not in result["stderr"]


def test_docs_generation_does_not_need_torch(without_torch):
    assert "benchmarks.md" in without_torch["docs"]
    assert not without_torch["torch imported"]
