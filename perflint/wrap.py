"""Keeping fixed lines within the file's line length.

A fix replaces an expression with another, often longer one (`torch.bincount(y, minlength=10)`
becomes a `scatter_add_` call of 110 characters). When the new line would be longer than the
file's line length (ruff's or black's `line-length`, else 88) and longer than it was, the
inserted expression is laid out over several lines, the way black lays out code: split at
its last bracket first (`f(...).g(` / the arguments / `)`), arguments on one indented line
when they fit, else one per line with a trailing comma; an expression with no bracket to
split at is wrapped in parentheses. Line breaks go only inside brackets, so the result is
valid wherever the expression was, and it is kept only when it parses to the same tree as
the one-line form (the caller also checks that the file still compiles).

Only expressions the fix writes on one line, without a comment, are laid out, and only where
nothing follows them on their line but code (a trailing comment, `# noqa` included, must
stay on the line the finding is on).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Sequence

from .rewrite import cst  # a lazy module: libcst loads when a long fixed line is laid out

DEFAULT_LINE_LENGTH = 88

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_line_lengths: dict[str, int] = {}


# --------------------------------------------------------------------------- the limit
def line_length_for(path: Path | str) -> int:
    """The line length that applies to `path`: from the nearest directory above it with a
    ruff configuration (`.ruff.toml`, `ruff.toml`, or a `pyproject.toml` with `[tool.ruff]`,
    in ruff's order) or a `[tool.black]` table that sets `line-length`: ruff's `line-length`
    (black's in the same `pyproject.toml`, else ruff's default 88), or black's; else 88.
    Looked up once per directory."""
    directory = Path(path).absolute()
    if not directory.is_dir():
        directory = directory.parent
    key = str(directory)
    found = _line_lengths.get(key)
    if found is None:
        found = _line_lengths[key] = _lookup(directory)
    return found


def _lookup(directory: Path) -> int:
    for parent in (directory, *directory.parents):
        for name in (".ruff.toml", "ruff.toml"):
            data = _toml(parent / name)
            if data is not None:
                return _length(data.get("line-length")) or DEFAULT_LINE_LENGTH
        data = _toml(parent / "pyproject.toml")
        if data is None:
            continue
        tool = data.get("tool")
        if not isinstance(tool, dict):
            continue
        ruff, black_table = tool.get("ruff"), tool.get("black")
        if isinstance(ruff, dict):
            return _length(ruff.get("line-length")) or _black_length(black_table) or DEFAULT_LINE_LENGTH
        black = _black_length(black_table)
        if black is not None:
            return black
    return DEFAULT_LINE_LENGTH


def _black_length(table: object) -> int | None:
    return _length(table.get("line-length")) if isinstance(table, dict) else None


def _length(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1000 else None


def _toml(path: Path) -> dict | None:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- the edits
def wrap_edits(text: str, edits: Sequence[tuple[int, int, str]], line_length: int | None
               ) -> list[tuple[int, int, str]]:
    """`edits` (character offsets into `text`), with each inserted expression that would make
    its line longer than `line_length` (and than the line was) laid out over several lines."""
    if not line_length or not edits:
        return list(edits)
    out = []
    for index, edit in enumerate(edits):
        others = [e for i, e in enumerate(edits) if i != index]
        out.append(_wrap_edit(text, edit, others, line_length) or edit)
    return out


def _wrap_edit(text: str, edit: tuple[int, int, str], others: list[tuple[int, int, str]],
               limit: int) -> tuple[int, int, str] | None:
    start, end, content = edit
    if start == end or "\n" in content or "\r" in content or "#" in content:
        return None
    line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
    match = _LINE_BREAK.search(text, end)
    line_end = match.start() if match else len(text)
    if any(o_start < line_end and line_start < o_end or o_start == o_end and line_start <= o_start <= line_end
           for o_start, o_end, _ in others):
        return None  # another fix on the same line: leave the layout alone
    prefix, suffix = text[line_start:start], text[end:line_end]
    new_length = len(prefix) + len(content) + len(suffix)
    old_length = max(len(line) for line in _LINE_BREAK.split(text[line_start:line_end]))
    if new_length <= limit or new_length <= old_length or "#" in suffix:
        return None
    try:
        before = ast.dump(ast.parse(content.strip(), mode="eval"))
        ast.parse(text[start:end].strip(), mode="eval")  # replacing an expression, not a statement
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    indent = re.match(r"[ \t]*", prefix).group(0)  # type: ignore[union-attr]
    newline = _LINE_BREAK.search(text)
    wrapped = layout(content, len(prefix), indent, limit, len(suffix), newline.group(0) if newline else "\n")
    if wrapped is None or wrapped == content:
        return None
    try:
        if ast.dump(ast.parse(wrapped, mode="eval")) != before:
            return None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return start, end, wrapped


# --------------------------------------------------------------------------- the layout
def layout(expression: str, column: int, indent: str, limit: int, tail: int = 0, newline: str = "\n") -> str | None:
    """`expression` laid out to start at `column`, its continuation lines indented from
    `indent`, with `tail` characters after it on its last line; None when libcst cannot
    parse it."""
    try:
        node = cst.parse_expression(expression)
    except Exception:
        return None
    unit = "\t" if "\t" in indent else "    "
    try:
        text = _Layout(limit, unit).expr(node, column, indent, tail, top=True)
    except RecursionError:
        return None
    return text.replace("\n", newline) if newline != "\n" else text


class _Layout:
    def __init__(self, limit: int, unit: str) -> None:
        self.cst = cst
        self.limit = limit
        self.unit = unit
        self._module = cst.Module(body=[])

    def flat(self, node) -> str:
        return self._module.code_for_node(node)

    def fits(self, column: int, text: str, tail: int) -> bool:
        return column + len(text) + tail <= self.limit

    # The expression: flat when it fits, else split at its last bracket, else inside
    # parentheses of its own (only at the top: elsewhere a bracket already encloses it).
    def expr(self, node, column: int, indent: str, tail: int, top: bool = False) -> str:
        flat = self.flat(node)
        if self.fits(column, flat, tail):
            return flat
        split = self.split(node, column, indent, tail)
        if split is not None:
            return split
        if top and self._can_parenthesize(node):
            inner = self.delimited(node, indent + self.unit)
            return "(\n" + indent + self.unit + inner + "\n" + indent + ")"
        return flat

    def _can_parenthesize(self, node) -> bool:
        cst = self.cst
        return not isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                                     cst.ConcatenatedString, cst.FormattedString))

    def split(self, node, column: int, indent: str, tail: int) -> str | None:
        cst = self.cst
        if node.lpar:
            inner = node.with_changes(lpar=node.lpar[1:], rpar=node.rpar[:-1])
            return "(\n" + indent + self.unit + self.delimited(inner, indent + self.unit) + "\n" + indent + ")"
        if isinstance(node, cst.Call):
            items = [(self._arg_prefix(a), a.value) for a in node.args]
            sole_generator = len(node.args) == 1 and isinstance(node.args[0].value, cst.GeneratorExp)
            return self.bracketed(node.func, "(", items, ")", column, indent, tail, trailing_comma=not sole_generator)
        if isinstance(node, cst.Subscript):
            items = []
            for element in node.slice:
                if isinstance(element.slice, cst.Index) and element.slice.star is None:
                    items.append(("", element.slice.value))
                else:
                    items.append((self.flat(element.slice), None))
            return self.bracketed(node.value, "[", items, "]", column, indent, tail, trailing_comma=False)
        if isinstance(node, cst.Attribute):
            after = "." + node.attr.value
            if isinstance(node.value, (cst.Call, cst.Subscript)) or node.value.lpar:
                head = self.split(node.value, column, indent, tail + len(after))
                return None if head is None else head + after
            return None
        if isinstance(node, (cst.List, cst.Set, cst.Dict)):
            opening, closing = ("[", "]") if isinstance(node, cst.List) else ("{", "}")
            items = [self._element(e) for e in node.elements]
            return self.bracketed(None, opening, items, closing, column, indent, tail, trailing_comma=True)
        if isinstance(node, cst.Lambda):  # `lambda x: <body>`: split inside the body's brackets
            prefix = self.flat(node.with_changes(body=cst.Name("_")))[:-1]
            body = self.split(node.body, column + len(prefix), indent, tail)
            return None if body is None else prefix + body
        if isinstance(node, cst.UnaryOperation):
            prefix = self.flat(node.with_changes(expression=cst.Name("_")))[:-1]
            body = self.split(node.expression, column + len(prefix), indent, tail)
            return None if body is None else prefix + body
        return None

    def bracketed(self, head, opening: str, items: list, closing: str, column: int, indent: str, tail: int,
                  trailing_comma: bool) -> str | None:
        """`head(items)` split at this bracket: the head (itself split when it does not fit
        before the bracket), then the items on one indented line or one per line."""
        head_text = "" if head is None else self.flat(head)
        if not self.fits(column, head_text + opening, 0):
            if head is None:
                return None
            split_head = self.split(head, column, indent, len(opening))
            if split_head is None:
                return None
            head_text = split_head
            last = head_text.rsplit("\n", 1)[-1]
            flat_items = ", ".join(prefix + (self.flat(value) if value is not None else "") for prefix, value in items)
            if self.fits(len(last), opening + flat_items + closing, tail):
                return head_text + opening + flat_items + closing
        if not items:
            return None
        inner = indent + self.unit
        flat_items = ", ".join(prefix + (self.flat(value) if value is not None else "") for prefix, value in items)
        if self.fits(len(inner), flat_items, 0):
            body = flat_items
        else:
            lines = []
            for prefix, value in items:
                if value is None:
                    lines.append(prefix)
                    continue
                lines.append(prefix + self.expr(value, len(inner) + len(prefix), inner, 1))
            body = (",\n" + inner).join(lines) + ("," if trailing_comma else "")
        return head_text + opening + "\n" + inner + body + "\n" + indent + closing

    def delimited(self, node, indent: str) -> str:
        """An expression inside parentheses of its own, on lines starting at `indent`: a chain
        of binary or boolean operators one operand per line (the operator first), a
        conditional expression one clause per line, anything else as `expr` lays it out."""
        cst = self.cst
        column = len(indent)
        flat = self.flat(node)
        if self.fits(column, flat, 0):
            return flat
        if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)) and not node.lpar:
            operands, operators = self._chain(node)
            lines = [self.expr(operands[0], column, indent, 0)]
            for operator, operand in zip(operators, operands[1:]):
                lines.append(operator + " " + self.expr(operand, column + len(operator) + 1, indent, 0))
            return ("\n" + indent).join(lines)
        if isinstance(node, cst.IfExp) and not node.lpar:
            return ("\n" + indent).join([
                self.expr(node.body, column, indent, 0),
                "if " + self.expr(node.test, column + 3, indent, 0),
                "else " + self.expr(node.orelse, column + 5, indent, 0),
            ])
        return self.expr(node, column, indent, 0)

    def _chain(self, node) -> tuple[list, list[str]]:
        """The operands and operators of `a + b - c` (one precedence level, left to right)."""
        cst = self.cst
        kind = type(node)
        level = self._operator_group(node.operator)
        operands, operators = [], []
        current = node
        while isinstance(current, kind) and not current.lpar and self._operator_group(current.operator) == level:
            operands.append(current.right)
            operators.append(self.flat(current.operator).strip())
            current = current.left
        operands.append(current)
        operands.reverse()
        operators.reverse()
        assert len(operands) == len(operators) + 1 and cst is not None
        return operands, operators

    def _operator_group(self, operator) -> str:
        cst = self.cst
        groups = ((cst.Add, cst.Subtract), (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply),
                  (cst.BitOr,), (cst.BitAnd,), (cst.BitXor,), (cst.LeftShift, cst.RightShift), (cst.And,), (cst.Or,))
        for index, group in enumerate(groups):
            if isinstance(operator, group):
                return str(index)
        return type(operator).__name__  # `**` and the rest: one operator per group

    def _arg_prefix(self, arg) -> str:
        if arg.keyword is not None:
            return arg.keyword.value + "="
        return arg.star or ""

    def _element(self, element) -> tuple[str, object]:
        cst = self.cst
        if isinstance(element, cst.DictElement):
            return self.flat(element.key) + ": ", element.value
        if isinstance(element, cst.StarredDictElement):
            return "**", element.value
        if isinstance(element, cst.StarredElement):
            return "*", element.value
        return "", element.value
