#!/usr/bin/env python3
"""The floor under any linter written on Python's `ast`: parsing alone, and one bare walk.

    python benchmarks/parse_floor.py /tmp/bench-work/speed/src/transformers

Reads every `.py` file below the path, then times in one process `ast.parse` of each, and
`ast.walk` over every node of each tree. docs/performance.md compares these with ruff's
whole run on the same files (benchmarks/lint_speed.py) to show what "within 4x of ruff"
leaves for the analysis itself.
"""

from __future__ import annotations

import argparse
import ast
import os
import time
import warnings
from pathlib import Path


def measure(root: Path) -> dict:
    sources = []
    for folder, _, names in os.walk(root):
        sources += [Path(folder, n).read_bytes() for n in sorted(names) if n.endswith(".py")]
    lines = sum(s.count(b"\n") for s in sources)
    parse_s = walk_s = 0.0
    nodes = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old files
        for source in sources:  # one tree at a time, as a linter holds them
            start = time.perf_counter()
            try:
                tree = ast.parse(source)
            except (SyntaxError, ValueError):
                continue
            parsed = time.perf_counter()
            nodes += sum(1 for _ in ast.walk(tree))
            walk_s += time.perf_counter() - parsed
            parse_s += parsed - start
    return {"files": len(sources), "lines": lines, "nodes": nodes, "parse_s": round(parse_s, 3),
            "walk_s": round(walk_s, 3), "parse_lines_per_s": round(lines / parse_s) if parse_s else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    for path in parser.parse_args().paths:
        r = measure(path)
        print(f"{path}: {r['files']} files, {r['lines']:,} lines, {r['nodes']:,} nodes; "
              f"ast.parse {r['parse_s']:.2f} s ({r['parse_lines_per_s']:,} lines/s, one process); "
              f"one ast.walk {r['walk_s']:.2f} s")


if __name__ == "__main__":
    main()
