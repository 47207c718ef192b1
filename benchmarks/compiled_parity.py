#!/usr/bin/env python3
"""The compiled build (`PERFLINT_COMPILE=1 pip install .`) against the plain one: same output, and how much faster.

    python benchmarks/compiled_parity.py --build /tmp/perflint-compiled examples DIR ...
    python benchmarks/compiled_parity.py --compiled-python /tmp/perflint-compiled/bin/python DIR ...

Run it with the interpreter the plain perflint is installed in. `--build VENV` makes a
virtualenv there and installs this checkout into it compiled (mypyc; a C compiler is needed,
and a few minutes); `--compiled-python` uses one made before. For each directory, both
builds run `perflint check --no-cache --exit-zero --output-format json .` (the directory is
its own project root when it has a pyproject.toml, as real projects do), and the two
reports must be byte-identical: mypyc checks annotations at run time and stores values by
their declared types (an `int`-typed `True` becomes `1`), so a difference is a bug to fix
in the annotations, never a tolerance. Each directory's wall time is the best of
`--repeat` runs per build. Exit status 1 when any output differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_IS_COMPILED = ("import importlib.machinery as m, perflint.facts.walker as w; "
                "print(any(w.__file__.endswith(s) for s in m.EXTENSION_SUFFIXES))")


def build(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {**os.environ, "PERFLINT_COMPILE": "1"}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(REPO)], check=True, env=env)
    return python


def is_compiled(python: Path | str) -> bool:
    # from "/": a checkout in the working directory would shadow the installed package
    out = subprocess.run([str(python), "-c", _IS_COMPILED], check=True, capture_output=True, text=True, cwd="/")
    return out.stdout.strip() == "True"


def run(python: Path | str, directory: Path) -> tuple[bytes, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    start = time.perf_counter()
    out = subprocess.run([str(python), "-m", "perflint", "check", "--no-cache", "--exit-zero", "--output-format",
                          "json", "."], cwd=directory, capture_output=True, env=env, check=True)
    return out.stdout, time.perf_counter() - start


def best(python: Path | str, directory: Path, repeat: int) -> tuple[bytes, float]:
    runs = [run(python, directory) for _ in range(repeat)]
    return runs[0][0], min(t for _, t in runs)


def differences(plain: bytes, compiled: bytes) -> list[str]:
    def keyed(raw: bytes) -> dict[str, dict]:
        return {json.dumps([f["filename"], f["location"], f["code"]]): f for f in json.loads(raw)}

    a, b = keyed(plain), keyed(compiled)
    out = [f"  only plain:    {k}" for k in sorted(set(a) - set(b))]
    out += [f"  only compiled: {k}" for k in sorted(set(b) - set(a))]
    out += [f"  differs:       {k}" for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return out or ["  same findings, different bytes (order or formatting)"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+", type=Path)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--build", type=Path, metavar="VENV", help="make VENV and install this checkout compiled")
    where.add_argument("--compiled-python", type=Path, help="the interpreter of a compiled install")
    parser.add_argument("--repeat", type=int, default=1, help="runs per build and directory (best time kept)")
    args = parser.parse_args()
    compiled = build(args.build.resolve()) if args.build else args.compiled_python
    if is_compiled(sys.executable) or not is_compiled(compiled):
        parser.error("run this with the plain install's interpreter, and give a compiled one")
    differ = 0
    total = {"plain": 0.0, "compiled": 0.0}
    for directory in args.directories:
        plain, t_plain = best(sys.executable, directory.resolve(), args.repeat)
        fast, t_fast = best(compiled, directory.resolve(), args.repeat)
        total["plain"] += t_plain
        total["compiled"] += t_fast
        findings = len(json.loads(plain))
        same = plain == fast
        print(f"{directory}: {findings} findings, {'same' if same else 'DIFFERENT'}; "
              f"plain {t_plain:.2f} s, compiled {t_fast:.2f} s ({t_plain / t_fast:.2f}x)", flush=True)
        if not same:
            differ += 1
            print("\n".join(differences(plain, fast)), flush=True)
    print(f"{len(args.directories)} directories, {differ} different; plain {total['plain']:.1f} s, "
          f"compiled {total['compiled']:.1f} s ({total['plain'] / total['compiled']:.2f}x)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
