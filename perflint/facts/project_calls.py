"""The file's side of the project pass: calls into other project files, and calls from them.

- Outwards: a call from hot code to what may be a function (or a class's method) of another
  project file is recorded in `FileAnalysis.external_hot_calls`, with a short signature of
  what it passes (`call_signature`); the project pass then analyzes that file with the
  function seeded hot. A call from any code that passes a loader or an object of a project
  class is recorded too (`CrossFile.bound_calls`): it binds the callee's parameters without
  making it hot. Every name called that may be another file's function is noted
  (`CrossFile.calls`): the project pass answers with those functions' summaries.
- Inwards: `FileAnalysis(hot_functions=...)` receives the seeds of this file
  (`CrossFile`): its functions other files call every step ("name(sig)"), those other files
  pass loaders or objects to ("~name(sig)"), and the summaries of the functions of other
  files this file calls (">qualname=summary", see `summaries`). What the callers pass binds
  the parameters (`bind_foreign_arguments`).
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, Sequence

from .environment import python_dict
from .hot_regions import parameter_defaults
from .records import FunctionInfo
from .summaries import (
    NOTHING,
    PROJECT_CLASS,
    PYTHON_CODE,
    SPREAD,
    Decoder,
    code_of,
    function_key,
    join_codes,
    parameters,
    split_codes,
)
from .values import PYTHON, Kind, Value, join

__all__ = ["ASKS_FOR", "BOUND", "FROM_STAR", "IF_TRAINS", "IMPORTED", "INHERITED", "MOVES_RETURNED", "PROJECT_CLASS", "CrossFile",
           "bind_foreign_arguments", "call_signature", "from_star", "parse_hot_function_seeds", "shape_binding",
           "tensor_shape"]

BOUND = "~"  # a seed that binds parameters only (the call does not run every step)
IMPORTED = ">"  # a seed that is another file's summary
# "qualname<Name" in `CrossFile.calls`: the summary of qualname is wanted only when another
# file wants the summary of this file's Name (what Name returns is what qualname returns)
ASKS_FOR = "<"
# "qualname(^i)" in `CrossFile.bound_calls`: hot code here moves to a device the batches of
# the loader qualname returns (at tuple position i; -1: the whole value), so the file that
# builds that `DataLoader(...)` reports on its settings ("~name(^i)" there)
MOVES_RETURNED = "^"
# "qualname#" in `CrossFile.calls`: a call in a loop of cold code, whose summary is wanted
# only when it says one call is a training step (`policy.train(replay_buffer)`); any other
# answer would cost the caller a second analysis for nothing
IF_TRAINS = "#"
# "+Class.method(sig)" in `CrossFile.override_calls`: hot code of a class that is not a module
# calls a method on `self` that a base class in another file defines
INHERITED = "+"


def call_signature(node: ast.Call, args: list[Value], kwargs: dict[str | None, Value],
                   bound_only: bool = False, objects: bool = True, numbers: bool | None = None) -> str:
    """`(t,-,mask=b)`: the kinds of a call's arguments (codes of `summaries`), up to the
    first `*args`; "" when no argument is known to be anything (most calls: the seed stays
    short). `bound_only`: only loaders and (`objects`) project objects, "" when there is
    none: what a call that does not run every step binds in its callee. `numbers` (by
    default, unless `bound_only`): Python values too."""
    def code(value: Value) -> str:
        found = code_of(value)
        if bound_only and found[:1] not in (("L", "@", "%") if objects else ("L",)):
            return NOTHING
        return found

    with_numbers = not bound_only if numbers is None else numbers

    def python(found: str, value: Value) -> str:
        # `log(step, loss.item())`, `update(loss=loss.item())`, `fit(..., focal_loss)` with
        # `focal_loss = False`: a Python value, known not to be a tensor, whatever the callee
        # names its parameter
        return PYTHON_CODE if found == NOTHING and with_numbers and value.kind is Kind.PYTHON else found

    codes = []
    for arg_node, value in zip(node.args, args):
        if isinstance(arg_node, ast.Starred):
            break
        codes.append(python(code(value), value))
    keywords = [(key, python(code(value), value)) for key, value in kwargs.items() if key is not None]
    if any(found != NOTHING for _key, found in keywords):
        # every keyword, so that the callee knows what its `**kwargs` holds (`**` when a
        # `**mapping` may pass more)
        codes.extend(f"{key}={found}" for key, found in keywords)
        if None in kwargs:
            codes.append(f"{SPREAD}={NOTHING}")
    if all(found.rpartition("=")[2] == NOTHING for found in codes):
        return ""
    return "(" + ",".join(codes) + ")"


_TENSOR_CODES = frozenset({"t", "b", "c", "g", "B", "Bc", "Bg"})


def tensor_shape(signature: str) -> str:
    """The tensor (and batch) kinds of a call signature, the rest "-": `(t,@m.C,k=b)` ->
    "t,-,k=b" ("" when it has none). What a small function returns may depend on them."""
    codes = []
    for code in split_codes(signature[1:-1]) if signature.startswith("(") else []:
        key, eq, kind = code.rpartition("=")
        if kind in _TENSOR_CODES:
            codes.append(key + eq + kind)
        elif not eq:
            codes.append(NOTHING)
    while codes and codes[-1] == NOTHING:
        codes.pop()
    return ",".join(codes)


def shape_binding(func: FunctionInfo, shape: str, decoder: Decoder) -> dict[str, Value]:
    """The parameters of `func` bound to the kinds of `tensor_shape`."""
    params = parameters(func)
    binding: dict[str, Value] = {}
    for index, code in enumerate(shape.split(",") if shape else []):
        key, _, kind = code.rpartition("=")
        name = key or (params[index] if index < len(params) else "")
        if name and kind != NOTHING:
            binding[name] = decoder.value(kind)
    return binding


def parse_hot_function_seeds(seeds: Iterable[str]) -> dict[str, list[str]]:
    """`"f(t,-)"`, `"Model.step"` -> {"f": ["t,-"], "Model.step": [""]}: the module-level
    functions ("name" or "Class.method") that other files call every step, each with the
    argument kinds every such call passes (see `call_signature`)."""
    hot_functions: dict[str, list[str]] = {}
    for seed in seeds:
        if seed[:1] in (BOUND, IMPORTED):
            continue
        name, _, signature = seed.partition("(")
        hot_functions.setdefault(name, []).append(signature.rstrip(")"))
    return hot_functions


class CrossFile:
    """What crosses this file's boundary, both ways."""

    def __init__(self, seeds: Iterable[str]) -> None:
        seeds = sorted(seeds)
        self.hot: dict[str, list[str]] = parse_hot_function_seeds(seeds)
        self.bound: dict[str, list[str]] = {}  # "name" -> signatures of calls that only bind
        self.imported: dict[str, str] = {}  # qualified name as this file calls it -> summary
        self.shaped: set[str] = set()  # ... of those, the ones with summaries for some argument kinds
        # "name" -> positions of the loaders it returns whose batches other files move every step
        self.returns_moved: dict[str, set[int]] = {}
        for seed in seeds:
            if seed.startswith(BOUND):
                name, _, signature = seed[1:].partition("(")
                signature = signature.rstrip(")")
                if signature.startswith(MOVES_RETURNED):
                    self.returns_moved.setdefault(name, set()).add(int(signature[1:]))
                else:
                    self.bound.setdefault(name, []).append(signature)
            elif seed.startswith(IMPORTED):
                qualname, _, summary = seed[1:].rpartition("=")  # codes hold no "="
                self.imported[qualname] = summary
                if qualname.endswith(")"):  # what it returns for the kinds of one call's arguments
                    self.shaped.add(qualname.partition("(")[0])
        self.hot_calls: set[str] = set()  # `FileAnalysis.external_hot_calls`
        self.override_calls: set[str] = set()  # `FileResult.overrides`
        self.class_bases: set[str] = set()  # `FileResult.bases`
        self.bound_calls: set[str] = set()
        self.calls: set[str] = set()
        # (id(function), name) -> the project call whose result the name holds (`train =
        # train_fns.GAN_training_function(...)`): asked for when the name is called
        self.results_of: dict[tuple[int, str], str] = {}
        self.cold_calls: dict[int, set[str]] = {}  # id(function) -> names called in its cold code
        self.runs_hot: set[int] = set()  # ids of the functions with code that runs every step
        # (function key, position, name) of the parameters whose loaders' batches this file
        # moves to a device every step
        self.moves: set[tuple[str, int, str]] = set()
        # calls that hand a loader made here to a function of another file that moves its
        # batches every step -> those `DataLoader(...)` calls
        self.fed: dict[ast.Call, list[ast.Call]] = {}
        self.feeding: set[int] = set()  # ids of the functions making such calls
        # objects and loaders other files pass, for the summary pass: id(function) -> name -> value
        self.summary_args: dict[int, dict[str, Value]] = {}
        self.specialized: dict[tuple, Value | None] = {}  # (id(function), argument codes) -> what it returns
        self.specializing = 0
        self.decoder: Decoder | None = None

    def asked(self) -> tuple[str, ...]:
        """The names whose summaries this file wants (`FileResult.calls`): called where the
        answer may matter, or in cold code of a function that also runs hot code."""
        names = set(self.calls)
        for func in self.runs_hot:
            names.update(self.cold_calls.get(func, ()))
        return tuple(sorted(names))


def keywords_key(func: FunctionInfo) -> str | None:
    """The key, in `FunctionInfo.arg_values`, of what its `**kwargs` holds (None: it has none)."""
    node = func.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.args.kwarg is None:
        return None
    return SPREAD + node.args.kwarg.arg


def keywords_value(values: list[Value], complete: bool) -> Value:
    """What `**kwargs` holds for one call: a dict whose values are the extra keyword
    arguments' (`complete`: they are all known), else a dict of unknown contents."""
    return python_dict(values) if complete else PYTHON


def _bind_foreign_keywords(func: FunctionInfo, signatures: list[str], decoder: Decoder) -> None:
    """`def update(self, **kwargs)` called from other files as `update(loss=loss.item())`
    (signature `(loss=p)`): its `**kwargs` holds Python values. A signature that lists no
    keyword may have dropped unknown ones: then nothing is known of it."""
    key = keywords_key(func)
    if key is None:
        return
    declared = parameter_defaults(func)
    for signature in signatures:
        entries = [code.partition("=") for code in (split_codes(signature) if signature else [])]
        named = [(name, code) for name, sep, code in entries if sep]
        extras = [(name, code) for name, code in named if name not in declared]
        if named and not extras:
            continue  # keywords known, none of them extra: `**kwargs` is empty for this call
        complete = bool(named) and all(code != NOTHING and name != SPREAD for name, code in extras)
        value = keywords_value([decoder.value(code) for _name, code in extras], complete)
        old = func.arg_values.get(key)
        func.arg_values[key] = value if old is None else join(old, value)


def bind_foreign_arguments(func: FunctionInfo, signatures: list[str], decoder: Decoder,
                           summary_args: dict[str, Value] | None = None) -> None:
    """What other files pass to `func` (tensors, masks, batches, loaders, objects) binds its
    parameters as a call in this file would; loaders and objects are known to its summary
    too (`summary_args`: `self.coder = coder` in `__init__`)."""
    params = parameters(func)
    key = function_key(func) or func.name
    passed: dict[tuple[int, str], list[str]] = {}
    for signature in signatures:
        for index, code in enumerate(signature.split(",") if signature else []):
            name, _, code = code.rpartition("=")
            position = index if not name else (params.index(name) if name in params else -1)
            name = name or (params[index] if index < len(params) else "")
            if name and code != NOTHING:
                passed.setdefault((position, name), []).append(code)
    for (position, name), codes in passed.items():
        loaders = [code for code in codes if code[:1] == "L"]
        if len(loaders) > 1:  # several loaders: one loader with what they share (pinned if one is)
            joined = loaders[0]
            for code in loaders[1:]:
                joined = join_codes(joined, code)
            codes = [code for code in codes if code[:1] != "L"] + [joined]
        for code in codes:
            value = decoder.value(code, param=(key, position, name))
            if value.kind is Kind.UNKNOWN and not (value.ref or "").startswith(PROJECT_CLASS):
                continue
            old = func.arg_values.get(name)
            func.arg_values[name] = value if old is None else join(old, value)
            if summary_args is not None and (value.kind in (Kind.LOADER, Kind.OBJECT, Kind.UNKNOWN)):
                old = summary_args.get(name)
                summary_args[name] = value if old is None else join(old, value)
    _bind_foreign_keywords(func, signatures, decoder)


# A hot call `*.message_hub.MessageHub.update_scalar`: the method of a class guessed from the
# attribute that holds the object, in whichever project module has that name (the project
# pass resolves it only when exactly one module does).
ANY_PACKAGE = "*."
# A name that one of several `from m import *` may bring (`from datasets import *`, `from
# utils import *`, then `accuracy(...)`): "*?datasets|utils.accuracy" ("/" for the dots of a
# module's name); the project pass takes the first of those modules that defines it.
FROM_STAR = "*?"


def from_star(modules: Sequence[str], name: str) -> str:
    return FROM_STAR + "|".join(m.replace(".", "/") for m in modules) + "." + name


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
