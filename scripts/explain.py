"""Developer tool: print the analyzer's view (value, hot) of every expression on given lines.

    python scripts/explain.py FILE LINE [LINE ...]
"""

from __future__ import annotations

import ast
import sys

from perflint.facts.analysis import FileAnalysis
from perflint.facts.context import RuleContext
from perflint.source import SourceFile


def main() -> None:
    path, lines = sys.argv[1], {int(x) for x in sys.argv[2:]}
    source = SourceFile.from_bytes(path, open(path, "rb").read())
    tree = source.parse()
    seen = []

    def visit(node, ctx):
        if getattr(node, "lineno", None) in lines:
            v = ctx.value(node)
            seen.append((node.lineno, node.col_offset, ctx.hot, ctx.function_name, ast.unparse(node)[:60], v))

    types = [t for t in vars(ast).values() if isinstance(t, type) and issubclass(t, ast.expr)]
    dispatch = {t: [visit] for t in types}
    analysis = FileAnalysis(tree, dispatch, {visit: False})
    RuleContext(source, analysis)
    analysis.run()
    for row, col, hot, fn, text, value in seen:
        extra = ",".join(f"{k}={getattr(value, k)}" for k in ("dtype", "zero_dim", "device", "ref") if getattr(value, k))
        print(f"{row}:{col} hot={hot} in={fn} {value.kind.value}{'(' + extra + ')' if extra else ''}  {text}")


if __name__ == "__main__":
    main()
