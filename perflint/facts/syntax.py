"""Small questions about syntax alone: dotted names, decorators, comprehensions, patterns."""

from __future__ import annotations

import ast
from collections import deque
from typing import Iterable, Iterator

def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)`, as a list: one plain loop instead of two generators
    (the analysis asks for children millions of times on a large project)."""
    children: list[ast.AST] = []
    for name in node._fields:
        field = getattr(node, name, None)
        if isinstance(field, ast.AST):
            children.append(field)
        elif isinstance(field, list):
            for item in field:
                if isinstance(item, ast.AST):
                    children.append(item)
    return children


def walk_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)`: the node and every node below it, breadth first, in the same order."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(child_nodes(node))
        yield node


SCANNED = (ast.expr, ast.comprehension)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# Fields that never hold an expression or comprehension (what iter_child_nodes would yield
# and the collector would drop); skipping them is what makes the scan cheap.
_NOT_SCANNED = frozenset({"ctx", "op", "ops", "keywords", "id", "attr", "conversion", "kind", "type_comment"})
_SCAN_FIELDS: dict[type, tuple[str, ...]] = {}


def _scan_fields(cls: type) -> tuple[str, ...]:
    fields = tuple(f for f in cls._fields if f not in _NOT_SCANNED)  # type: ignore[attr-defined]
    if cls is ast.Lambda:
        fields = tuple(f for f in fields if f != "args")  # `arguments`, not an expression
    if cls is ast.Constant:
        fields = ()
    _SCAN_FIELDS[cls] = fields
    return fields


def contains_comprehension(root: ast.AST) -> bool:
    """Is there a comprehension anywhere in this expression, following the same children
    as `ast.iter_child_nodes` restricted to expressions and comprehensions?"""
    stack = [root]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if isinstance(node, _COMPREHENSIONS):
            return True
        cls = type(node)
        fields = _SCAN_FIELDS.get(cls)
        if fields is None:
            fields = _scan_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if type(value) is list:
                for item in value:
                    if isinstance(item, SCANNED):
                        push(item)
            elif isinstance(value, SCANNED):
                push(value)
    return False


def assigned_values(scope: ast.AST, name: str) -> list[ast.expr]:
    """The values `name = ...` binds anywhere in `scope` (also `a = name = ...`)."""
    return [node.value for node in walk_nodes(scope) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]


def index_parts(index: ast.expr) -> list[ast.expr]:
    """The parts of a subscript that index by value: a tuple's items (or the index itself),
    without slices and starred items."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return [p for p in parts if not isinstance(p, (ast.Slice, ast.Starred))]


def contains_yield(body: list[ast.stmt]) -> bool:
    """Does the block yield (not in a function or class it defines)?"""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(child_nodes(node))
    return False


def decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return dotted(node).rsplit(".", 1)[-1]


def dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Subscript):  # Generic[T], nn.Module[...]
        return dotted(node.value)
    return ""


def pattern_names(pattern: ast.AST) -> Iterable[str]:
    for node in walk_nodes(pattern):
        name = getattr(node, "name", None)
        if isinstance(name, str):
            yield name
        rest = getattr(node, "rest", None)
        if isinstance(rest, str):
            yield rest
