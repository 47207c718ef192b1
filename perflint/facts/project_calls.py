"""The file's side of the project pass: calls into other project files, and calls from them.

- Outwards: a call from hot code to what may be a function (or a class's method) of another
  project file is recorded in `FileAnalysis.external_hot_calls`, with a short signature of
  what it passes (`call_signature`); the project pass then analyzes that file with the
  function seeded hot.
- Inwards: `FileAnalysis(hot_functions=...)` receives those seeds for this file
  (`parse_hot_function_seeds`), and what the callers pass binds the parameters
  (`bind_foreign_arguments`).
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

from .records import FunctionInfo
from .values import BOOL_TENSOR, TENSOR, Kind, Value, join

# What a call to another file passes, one code per argument: a tensor that may be on an
# accelerator ("t"), a boolean one ("b"), one on the CPU ("c"), anything else ("-").
_SIGNATURE_VALUES = {
    "t": TENSOR,
    "b": BOOL_TENSOR,
    "c": Value(Kind.TENSOR, device="cpu"),
}


def _signature_code(value: Value) -> str:
    if value.kind is not Kind.TENSOR:
        return "-"
    if value.on_cpu:
        return "c"
    return "b" if value.dtype == "bool" else "t"


def call_signature(node: ast.Call, args: list[Value], kwargs: dict[str | None, Value]) -> str:
    """`(t,-,mask=b)`: the kinds of a call's arguments, up to the first `*args`; "" when no
    argument is known to be a tensor (most calls: the seed stays short)."""
    codes = []
    for arg_node, value in zip(node.args, args):
        if isinstance(arg_node, ast.Starred):
            break
        codes.append(_signature_code(value))
    codes.extend(f"{key}={_signature_code(value)}" for key, value in kwargs.items()
                 if key is not None and value.kind is Kind.TENSOR)
    if all(code.endswith("-") for code in codes):
        return ""
    return "(" + ",".join(codes) + ")"


# `ref` of an unknown value that is an instance of a class imported from (maybe) a project
# file: the prefix, then the class's qualified name as imported.
PROJECT_CLASS = "@"


def parse_hot_function_seeds(seeds: Iterable[str]) -> dict[str, list[str]]:
    """`"f(t,-)"`, `"Model.step"` -> {"f": ["t,-"], "Model.step": [""]}: the module-level
    functions ("name" or "Class.method") that other files call every step, each with the
    argument kinds every such call passes (see `call_signature`)."""
    hot_functions: dict[str, list[str]] = {}
    for seed in seeds:
        name, _, signature = seed.partition("(")
        hot_functions.setdefault(name, []).append(signature.rstrip(")"))
    return hot_functions


def bind_foreign_arguments(func: FunctionInfo, signatures: list[str]) -> None:
    """What other files pass to `func` (tensors, masks, CPU tensors) binds its parameters
    as a call in this file would."""
    node = func.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    if func.is_method and params:
        params = params[1:]
    for signature in signatures:
        for index, code in enumerate(signature.split(",") if signature else []):
            key, _, code = code.rpartition("=")
            name = key or (params[index] if index < len(params) else None)
            value = _SIGNATURE_VALUES.get(code)
            if name is None or value is None:
                continue
            old = func.arg_values.get(name)
            func.arg_values[name] = value if old is None else join(old, value)


# A hot call `*.message_hub.MessageHub.update_scalar`: the method of a class guessed from the
# attribute that holds the object, in whichever project module has that name (the project
# pass resolves it only when exactly one module does).
ANY_PACKAGE = "*."
_SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def by_attribute_name(receiver: ast.expr, method: str) -> tuple[str, str] | None:
    """(hot call, what it names) for a method called on an unknown object held in an
    attribute or a parameter named after its class, by the convention that the class is
    defined in a module of the same name: `runner.message_hub.update_scalar(...)` ->
    ("*.message_hub.MessageHub.update_scalar", "MessageHub.update_scalar"). Only two-word
    names or longer (`message_hub`, not `logger` or `h`)."""
    name = receiver.attr if isinstance(receiver, ast.Attribute) else \
        receiver.id if isinstance(receiver, ast.Name) else ""
    name = name.lstrip("_")
    if not _SNAKE_CASE.fullmatch(name) or method.startswith("__"):
        return None
    target = "".join(part.capitalize() for part in name.split("_")) + "." + method
    return f"{ANY_PACKAGE}{name}.{target}", target
