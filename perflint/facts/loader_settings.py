"""What a `DataLoader(ds, **kwargs)` call is given through a dict built in the same function.

    kwargs = {"batch_size": 64, "num_workers": 0}
    if use_cuda:
        kwargs.update({"pin_memory": True})
    loader = DataLoader(ds, **kwargs)

Read syntactically, in the scope (function or module) of the call: one assignment of a dict
literal (or `dict(k=v, ...)`), then `kwargs.update({...})` / `kwargs.update(k=v)`,
`kwargs["k"] = v`, `kwargs.pop("k")` / `del kwargs["k"]`. A change under an `if`, a loop or
a `try` (relative to the assignment) may or may not happen: the key keeps its old value as
one possibility. Anything else that touches the dict before the call (passed to a function,
reassigned, updated from another mapping) makes the whole dict unknown: the loader rules
then stay silent, as they do for any `**kwargs`.

The result is a map from key to the set of values the key may have (`ABSENT`: not set,
`UNREAD`: set to something that is not a literal).
"""

from __future__ import annotations

import ast

from .syntax import child_nodes


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


ABSENT = _Sentinel("ABSENT")  # the key is not in the dict on this path
UNREAD = _Sentinel("UNREAD")  # the key holds something that is not a literal

Settings = dict[str, frozenset]
_ATTR = "_perflint_star_settings"
_CONDITIONAL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match, ast.IfExp)
_READS = frozenset({"get", "items", "keys", "values", "copy"})


def attach(call: ast.Call, scope: ast.AST) -> None:
    """Resolve and remember the `**name` settings of `call` (once; a syntactic fact)."""
    if hasattr(call, _ATTR) or not any(kw.arg is None for kw in call.keywords):
        return
    setattr(call, _ATTR, _resolve(call, scope))


def star_settings(call: ast.Call) -> Settings | None:
    """The settings its `**` arguments give, merged in order; None when unknown or when it
    has none."""
    return getattr(call, _ATTR, None)


def _literal(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else UNREAD


def _resolve(call: ast.Call, scope: ast.AST) -> Settings | None:
    merged: Settings = {}
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        if isinstance(kw.value, ast.Dict):
            one = _dict_literal(kw.value)
        elif isinstance(kw.value, ast.Name):
            one = _named_dict(kw.value.id, call, scope)
        else:
            one = None
        if one is None:
            return None
        merged.update(one)
    return merged


def _dict_literal(node: ast.expr) -> Settings | None:
    if isinstance(node, ast.Dict):
        out: Settings = {}
        for key, value in zip(node.keys, node.values):
            if key is None or not isinstance(key, ast.Constant) or not isinstance(key.value, str):
                return None  # `{**other}` or a computed key
            out[key.value] = frozenset({_literal(value)})
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        if any(kw.arg is None for kw in node.keywords):
            return None
        return {kw.arg: frozenset({_literal(kw.value)}) for kw in node.keywords if kw.arg is not None}
    return None


def _walk_scope(scope: ast.AST):
    """(node, parent) pairs of the scope, not entering nested functions, classes or lambdas."""
    stack = [(child, scope) for child in child_nodes(scope)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend((child, node) for child in child_nodes(node))


def _before(node: ast.AST, call: ast.Call) -> bool:
    return (node.lineno, node.col_offset) < (call.lineno, call.col_offset)  # type: ignore[attr-defined]


def _named_dict(name: str, call: ast.Call, scope: ast.AST) -> Settings | None:
    parents: dict[ast.AST, ast.AST] = {}
    uses: list[ast.Name] = []
    for node, parent in _walk_scope(scope):
        parents[node] = parent
        if isinstance(node, ast.Name) and node.id == name and _before(node, call):
            uses.append(node)
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        every = scope.args.posonlyargs + scope.args.args + scope.args.kwonlyargs
        if any(a.arg == name for a in every) or (scope.args.kwarg and scope.args.kwarg.arg == name) \
                or (scope.args.vararg and scope.args.vararg.arg == name):
            return None  # a parameter: whatever callers pass
    uses.sort(key=lambda n: (n.lineno, n.col_offset))
    settings: Settings | None = None
    home: ast.AST | None = None  # the statement that assigned the dict
    for use in uses:
        parent = parents.get(use)
        statement = _statement(use, parents)
        if isinstance(use.ctx, ast.Store):
            if settings is not None or not isinstance(statement, ast.Assign) or statement.targets != [use]:
                return None
            settings = _dict_literal(statement.value)
            if settings is None:
                return None
            home = statement
            continue
        if settings is None:
            return None  # used before it is assigned here: a global, a closure
        conditional = _conditional(statement, home, parents)
        change = _change(use, parent, parents, scope)
        if change is None:
            return None
        if isinstance(change, str):  # "read"
            continue
        for key, value in change.items():
            old = settings.get(key, frozenset({ABSENT}))
            settings[key] = old | value if conditional else value
    return settings


def _statement(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST | None:
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(node)  # type: ignore[assignment]
    return node


def _conditional(statement: ast.AST | None, home: ast.AST | None, parents: dict[ast.AST, ast.AST]) -> bool:
    """Does `statement` run only on some paths that ran `home` (the assignment)?"""
    if statement is None or home is None:
        return True
    outer = parents.get(home)
    node = parents.get(statement)
    while node is not None and node is not outer:
        if isinstance(node, _CONDITIONAL):
            return True
        node = parents.get(node)
    return False


def _change(use: ast.Name, parent: ast.AST | None, parents: dict[ast.AST, ast.AST],
            scope: ast.AST) -> Settings | str | None:
    """What a use of the dict does to it: "read", a map of the keys it sets, or None (unknown)."""
    if isinstance(parent, ast.keyword) and parent.arg is None:
        return "read"  # `**kwargs` in another call
    if isinstance(parent, ast.Call) and parent.args == [use] and not parent.keywords \
            and isinstance(parent.func, ast.Attribute) and parent.func.attr == "update" \
            and not (isinstance(parent.func.value, ast.Name) and parent.func.value.id == use.id):
        return "read"  # `train_kwargs.update(cuda_kwargs)` reads cuda_kwargs
    if isinstance(parent, ast.Dict) and use in parent.values and None in parent.keys \
            and parent.keys[parent.values.index(use)] is None:
        return "read"  # `{**cuda_kwargs, ...}`
    if isinstance(parent, ast.Subscript) and parent.value is use:
        key = parent.slice
        if isinstance(parent.ctx, ast.Load):
            return "read"
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        statement = parents.get(parent)
        if isinstance(parent.ctx, ast.Del):
            return {key.value: frozenset({ABSENT})}
        if isinstance(statement, ast.Assign) and statement.targets == [parent]:
            return {key.value: frozenset({_literal(statement.value)})}
        return None
    if isinstance(parent, ast.Attribute) and parent.value is use:
        method = parent.attr
        call = parents.get(parent)
        if not (isinstance(call, ast.Call) and call.func is parent):
            return None
        if method in _READS:
            return "read"
        if method == "update" and isinstance(parents.get(call), ast.Expr):
            if call.args and (len(call.args) > 1 or call.keywords):
                return None
            if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id != use.id:
                # `kwargs.update(cuda_kwargs)`: another dict of this scope, as it is there
                return _named_dict(call.args[0].id, call, scope)
            if call.args:
                return _dict_literal(call.args[0])
            return _dict_literal(ast.Call(func=ast.Name(id="dict"), args=[], keywords=call.keywords))
        if method in ("pop", "setdefault") and call.args and isinstance(call.args[0], ast.Constant) \
                and isinstance(call.args[0].value, str):
            popped = call.args[0].value
            if method == "pop":
                return {popped: frozenset({ABSENT})}
            return None  # setdefault: depends on what is there
        return None
    return None


__all__ = ["ABSENT", "UNREAD", "attach", "star_settings"]
