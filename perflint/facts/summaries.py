"""Per-function summaries that cross files, and the short codes they are written in.

What crosses a module boundary is a string (it is part of cache keys): the kinds of the
arguments a call passes (`call_signature` in `project_calls`), and what a module-level
function or a method of a top-level class returns and does with its parameters.

Value codes (one argument, or what a function returns):

    t  a tensor that may be on an accelerator     b  a boolean one     c  one in host memory
    g  (arguments only) a tensor known to be on the accelerator, Bg a batch moved there
    B  a batch (a tensor or a structure of them)  Bc a batch in host memory
    L<p><w><c>  a DataLoader: its pin_memory (T true, F false, - not given, ? not a literal),
        num_workers (N more than 0, 0 none, - not given, ? not a literal) and collate_fn
        (C given, - not given, ? unknown): what the data rules read of the `DataLoader(...)`
    @pkg.mod.Cls  an instance of a class of a project file (named as the writer imports it;
        the project pass rewrites it for the reader)
    %Cls  an instance of a top-level class of the file that writes (or reads) the code
    -  anything else            ?  conflicting kinds (a join): nothing is known

and in what a function returns only:

    (x,y)  a tuple        [x]  a list, iterator or generator of x
    $i:name  its parameter `name`, the i-th positional one after `self` (i empty: keyword-only)
    *$i:name  an element of that parameter (`for obj in iterable: yield obj`)

A function's summary is its return code, then `!` and the parameters (`$i:name`, comma
separated) whose loaders' batches it moves to a device in code that runs every step:
`[*$0:iterable]` (a generator wrapper), `(t,b)`, `-!$1:labeled_loader,$2:unlabeled_loader`;
then `;u` when one call is one training step (it runs the backward pass or steps an
optimizer outside its own loops: `agent.update(batch)`), so a loop calling it in another file
is a training loop: `-;u`.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Callable, Iterable

from .loader_settings import ABSENT, UNREAD, star_settings
from .records import ClassInfo, FunctionInfo
from .values import (
    BOOL_TENSOR,
    ELEMENT_REF,
    PARAM_REF,
    PYTHON,
    TENSOR,
    UNKNOWN,
    Kind,
    Value,
    element_of,
    seq_of,
    tuple_of,
)

CLOSURE = "&"  # the summary of a function that returns a function it defines: "&inner"
PROJECT_CLASS = "@"  # `ref` prefix of an instance of a class imported from (maybe) a project file
LOCAL_CLASS = "%"
MOVES = "!"
TRAINS = ";u"  # the summary's tail for a function one call of which is one training step
CONFLICT = "?"
ON_ACCELERATOR = "g"  # call signatures only: a tensor known to be on the accelerator
NOTHING = "-"
PYTHON_CODE = "p"  # a Python value (a number, a string): a keyword argument, or an item of a returned tuple
NDARRAY_CODE = "n"  # a numpy array a function returns (`return t.cpu().numpy()`)
# ... which, in the caller, may be the batch's data (preprocessed frames) as well as arrays
# the function computed: not reported as host data made every step (PFL101)
_RETURNED_ARRAY = Value(Kind.NDARRAY, data=True)
# In a call signature, the keyword entry for a `**mapping` at the call; in
# `FunctionInfo.arg_values`, the prefix of the key of what a `**kwargs` parameter holds
SPREAD = "**"
_MAX_DEPTH = 2  # tuples of tuples; deeper structures are "-"

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
#            pin_memory, ...): the positions of the arguments a loader's code keeps.
_LOADER_POSITIONS = (("pin_memory", 7), ("num_workers", 5), ("collate_fn", 6))
_FOREIGN = "_perflint_foreign"  # on a `DataLoader(...)` node made up from a code
_PARAM = "_perflint_param"  # ... that stands for a loader passed to a parameter: (function, index, name)
# ... that stands for a loader a function of another file returns: (qualname as this file
# calls it, position in the returned tuple; -1: the whole return value)
_RETURNED = "_perflint_returned"

Lookup = Callable[[str, str], "Value | None"]  # (position, name) of a parameter -> what a call passes


# --------------------------------------------------------------------------- function keys
def function_key(func: FunctionInfo) -> str | None:
    """How other files name `func`: "name" (module level), "Class.method" (a method of a
    top-level class), or "outer.inner" (a function a module-level function defines, and may
    return: BigGAN's `train = train_fns.GAN_training_function(...)`); None for the others."""
    parent = func.parent
    if parent is not None:
        if func.cls is None and parent.parent is None and parent.cls is None:
            return f"{parent.name}.{func.name}"
        return None
    if func.cls is None:
        return func.name
    return f"{func.cls.name}.{func.name}" if func.cls.top_level else None


def parameters(func: FunctionInfo) -> list[str]:
    """The positional parameters a call's arguments bind, in order (after `self`)."""
    node = func.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    return params[1:] if func.is_method and params else params


# --------------------------------------------------------------------------- parameter markers
def param_marker(func: FunctionInfo, position: int | None, name: str) -> Value:
    """What a parameter holds while its function is summarized, when nothing else is known:
    an unknown value that remembers which parameter it is."""
    return Value(Kind.UNKNOWN, ref=_param_ref(func, position, name))


def _param_ref(func: FunctionInfo, position: int | None, name: str) -> str:
    return f"{PARAM_REF}{id(func)}:{'' if position is None else position}:{name}"


def loader_marker(func: FunctionInfo, position: int | None, name: str) -> Value:
    """What a parameter named like a loader (`loader`, `train_dl`) holds while its function
    is summarized: a loader (its batches, in host memory) that remembers which parameter it
    is, and whose batches remember it too (`for batch in loader: yield batch`)."""
    ref = _param_ref(func, position, name)
    return Value(Kind.LOADER, elem=Value(Kind.BATCH, data=True, device="cpu", ref=ELEMENT_REF + ref), ref=ref)


_MARKED = (Kind.UNKNOWN, Kind.LOADER, Kind.BATCH)


def _marker(value: Value) -> tuple[bool, str, str, str] | None:
    """(an element of it?, owner, position, name) of a parameter marker."""
    ref = value.ref
    if not ref or ref[0] not in (PARAM_REF, ELEMENT_REF) or value.kind not in _MARKED:
        return None
    element = ref[0] == ELEMENT_REF
    body = ref[2:] if element else ref[1:]
    owner, _, rest = body.partition(":")
    position, _, name = rest.partition(":")
    return element, owner, position, name


def parameter_of(value: Value, func: FunctionInfo) -> tuple[str, str] | None:
    """(position, name) when `value` is the marker of a parameter of `func` itself."""
    found = _marker(value)
    if found is None or found[0] or found[1] != str(id(func)):
        return None
    return found[2], found[3]


def has_markers(value: Value, depth: int = 0) -> bool:
    if _marker(value) is not None:
        return True
    if depth > _MAX_DEPTH:
        return False
    if value.elem is not None and has_markers(value.elem, depth + 1):
        return True
    return value.items is not None and any(has_markers(v, depth + 1) for v in value.items)


def instantiate(value: Value, owner: FunctionInfo, passed: Lookup, depth: int = 0) -> Value:
    """`value` (what `owner` returns, in terms of its parameters) for one call: each marker of
    `owner`'s parameters replaced by what the call passes (unknown when it passes nothing)."""
    found = _marker(value)
    if found is not None:
        element, key, position, name = found
        if key != str(id(owner)):
            return value
        argument = passed(position, name)
        if argument is None:  # what the parameter's name says, or nothing
            return UNKNOWN if value.kind is Kind.UNKNOWN else _unmarked(value)
        return element_of(argument) if element else argument
    if depth > _MAX_DEPTH or (value.elem is None and value.items is None):
        return value
    if value.kind is Kind.SEQ and value.items is None and value.elem is not None:
        inner = _marker(value.elem)
        if inner is not None and inner[0] and inner[1] == str(id(owner)):
            argument = passed(inner[2], inner[3])
            if argument is not None and argument.kind is Kind.LOADER:
                return argument  # a generator re-yielding a loader's batches: the same iteration
    elem = instantiate(value.elem, owner, passed, depth + 1) if value.elem is not None else None
    items = tuple(instantiate(v, owner, passed, depth + 1) for v in value.items) if value.items is not None else None
    if items is not None and value.kind is Kind.SEQ:
        return tuple_of(items)
    return replace(value, elem=elem, items=items)


def _unmarked(value: Value) -> Value:
    elem = _unmarked(value.elem) if value.elem is not None and value.elem.ref else value.elem
    return replace(value, ref=None, elem=elem)


def vague(value: Value) -> bool:
    """Is what a call returns unknown, in whole or in a part a caller unpacks?"""
    if value.kind is Kind.UNKNOWN:
        return True
    return value.kind is Kind.SEQ and value.items is not None and any(v.kind is Kind.UNKNOWN for v in value.items)


def call_lookup(node: ast.Call, args: list[Value], kwargs: dict[str | None, Value]) -> Lookup:
    """What a call passes for a parameter, by position (up to a `*args`) or by name."""
    positional = []
    for arg_node, value in zip(node.args, args):
        if isinstance(arg_node, ast.Starred):
            break
        positional.append(value)

    def passed(position: str, name: str) -> Value | None:
        if position.isdigit() and int(position) < len(positional):
            return positional[int(position)]
        return kwargs.get(name)

    return passed


# --------------------------------------------------------------------------- loaders
def loader_facts(call: object) -> str:
    """The three characters of a loader's code, from its `DataLoader(...)` call."""
    if not isinstance(call, ast.Call):
        return ""
    out = []
    star = star_settings(call)
    for name, position in _LOADER_POSITIONS:
        given = _loader_argument(call, name, position)
        if star is not None and isinstance(given, ast.Name) and given.id == "_" \
                and not any(kw.arg == name for kw in call.keywords) and len(call.args) <= position \
                and not any(isinstance(a, ast.Starred) for a in call.args):
            out.append(_star_fact(name, star.get(name, frozenset({ABSENT}))))  # `**kwargs` read here
            continue
        if given is None:
            out.append(NOTHING)
        elif name == "collate_fn":
            out.append(NOTHING if isinstance(given, ast.Constant) and given.value is None else "C")
        elif not isinstance(given, ast.Constant):
            out.append(CONFLICT)
        elif name == "pin_memory":
            out.append("T" if given.value else "F")
        else:
            value = given.value
            out.append("N" if type(value) is int and value > 0 else "0" if type(value) is int else CONFLICT)
    return "".join(out)


def _star_fact(name: str, found: frozenset) -> str:
    """One character of a loader's code from the values a `**kwargs` dict may give it."""
    values = [None if v is ABSENT else v for v in found]
    if name == "collate_fn":
        return NOTHING if all(v is None for v in values) else "C"
    if UNREAD in values:
        return CONFLICT
    if name == "pin_memory":  # pinned if one path pins (as loaders joined at a parameter)
        if any(v is True for v in values):
            return "T" if all(v is None or type(v) is bool for v in values) else CONFLICT
        if all(v is None for v in values):
            return NOTHING
        return "F" if all(v is None or v is False for v in values) else CONFLICT
    if all(v is None for v in values):
        return NOTHING
    if all(type(v) is int and v > 0 for v in values):
        return "N"
    return "0" if all(v is None or (type(v) is int and v <= 0) for v in values) else CONFLICT


def _loader_argument(call: ast.Call, name: str, position: int) -> ast.expr | None:
    """The expression passed for `name` (None: not given); a name for one a `*args` or
    `**kwargs` may hold."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    starred = next((i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)), None)
    if starred is not None and starred <= position:
        return ast.Name(id="_")  # a `*args` may hold it: not a literal
    if len(call.args) > position:
        return call.args[position]
    if any(kw.arg is None for kw in call.keywords):
        return ast.Name(id="_")  # `**kwargs` may hold it
    return None


def made_elsewhere(node: object) -> bool:
    """Is this `DataLoader(...)` call made up from a code (the loader was built in another
    file): it has no place in this file to report on."""
    return bool(getattr(node, _FOREIGN, False))


def param_of(node: object) -> tuple[str, int, str] | None:
    """(function key, position, name) of the parameter a foreign loader was passed to."""
    return getattr(node, _PARAM, None)


def returned_by(node: object) -> tuple[str, int] | None:
    """(qualname, position): the function of another file, as this file names it, whose
    return value (at that tuple position; -1: all of it) is this foreign loader."""
    return getattr(node, _RETURNED, None)


def _made_up_loader(facts: str, param: tuple[str, int, str] | None,
                    returned: tuple[str, int] | None = None) -> ast.Call:
    keywords = []
    # `bool | int`, not the inferred int: compiled (mypyc) code would store True as 1
    literals: dict[str, bool | int] = {"T": True, "F": False, "N": 1, "0": 0}
    for (name, _position), char in zip(_LOADER_POSITIONS, facts):
        if char == NOTHING:
            continue
        if name == "collate_fn" and char == "C":
            value: ast.expr = ast.Name(id="collate_fn", ctx=ast.Load())
        elif char in literals and (name != "num_workers") == (char in "TF"):
            value = ast.Constant(value=literals[char])
        else:
            value = ast.Name(id="_", ctx=ast.Load())
        keywords.append(ast.keyword(arg=name, value=value))
    node = ast.Call(func=ast.Name(id="DataLoader", ctx=ast.Load()), args=[], keywords=keywords)
    setattr(node, _FOREIGN, True)
    if param is not None:
        setattr(node, _PARAM, param)
    if returned is not None:
        setattr(node, _RETURNED, returned)
    return node


def loader_value(facts: str, memo: dict, param: tuple[str, int, str] | None = None,
                 returned: tuple[str, int] | None = None) -> Value:
    """A loader built in another file: iterating it yields its batches (in host memory, as
    every DataLoader's), and both remember a made-up `DataLoader(...)` call with its facts
    (and the parameter it was passed to, or the call that returned it)."""
    key = (facts, param, returned)
    value = memo.get(key)
    if value is None:
        node = _made_up_loader(facts, param, returned)
        batch = Value(Kind.BATCH, data=True, device="cpu", origin=node)
        value = memo[key] = Value(Kind.LOADER, elem=batch, origin=node)
    return value


# --------------------------------------------------------------------------- encoding
def code_of(value: Value, owner: FunctionInfo | None = None, depth: int = 0) -> str:
    """The code of `value`; `owner`: the function whose parameters' markers may be written
    (what it returns), None for the argument of a call (flat codes only)."""
    if owner is not None and value.ref is not None:
        found = _marker(value)
        if found is not None and found[1] == str(id(owner)):
            return ("*" if found[0] else "") + f"${found[2]}:{found[3]}"
    kind = value.kind
    if kind is Kind.TENSOR:
        if value.on_cpu:
            return "c"
        if value.dtype == "bool":
            return "b"
        # an argument known to be on the accelerator (`targets.to(device)` handed to a loss);
        # what a function returns stays "t": a return code changing costs its callers more rounds
        return ON_ACCELERATOR if owner is None and value.on_accel else "t"
    if kind is Kind.BATCH:
        if value.on_cpu:
            return "Bc"
        return "B" + ON_ACCELERATOR if owner is None and value.on_accel else "B"
    if kind is Kind.LOADER:
        facts = loader_facts(value.origin)
        if facts:
            return "L" + facts
        # a function returning one of loaders built differently (BigGAN's `get_data_loaders`:
        # a sampler on one branch, shuffling on the other): a loader, of unknown settings
        return "L" + CONFLICT * len(_LOADER_POSITIONS) if owner is not None else NOTHING
    if kind is Kind.UNKNOWN or (kind is Kind.MODULE and (value.ref or "").startswith(PROJECT_CLASS)):
        # an instance of a project class, a module too (`model = NeRFNetwork(...)`): the callee
        # keeps a module by its name (calling it runs the model) and its class (its methods)
        ref = value.ref or ""
        return ref if ref.startswith(PROJECT_CLASS) else NOTHING
    if kind is Kind.PYTHON and owner is not None and value.elem is not None and depth < _MAX_DEPTH:
        inner = code_of(value.elem, owner, depth + 1)  # a dict whose values are known: `{"rois": array}`
        if inner == NDARRAY_CODE:
            return "{" + inner + "}"
    if kind is Kind.PYTHON and owner is not None and depth > 0:
        # `return loss.item(), acc`: numbers, whatever the caller names them (in a tuple only:
        # a plain number returned made the fixpoint analyze 7% more of transformers again)
        return PYTHON_CODE
    if kind is Kind.NDARRAY and owner is not None:
        return NDARRAY_CODE  # host data: `.tolist()` of it, or of its rows, copies nothing
    if kind is Kind.OBJECT and value.ref and value.ref.isidentifier():
        return LOCAL_CLASS + value.ref  # an instance of a class of this file (not a module)
    if kind is Kind.SEQ and owner is not None and depth < _MAX_DEPTH:
        if value.items is not None and 1 < len(value.items) <= 8:
            codes = [code_of(v, owner, depth + 1) for v in value.items]
            if any(informative(c) for c in codes):
                return "(" + ",".join(codes) + ")"
        elif value.items is None and value.elem is not None:
            inner = code_of(value.elem, owner, depth + 1)
            if informative(inner):
                return "[" + inner + "]"
    return NOTHING


def informative(code: str) -> bool:
    return code not in (NOTHING, CONFLICT, "", "[-]")


def split_summary(summary: str) -> tuple[str, list[tuple[str, str]], bool]:
    """(return code, [(position, name) of each parameter whose batches it moves], whether one
    call is one training step)."""
    trains = summary.endswith(TRAINS)
    returns, _, moved = summary.removesuffix(TRAINS).partition(MOVES)
    params = []
    for token in moved.split(",") if moved else []:
        position, _, name = token[1:].partition(":")
        params.append((position, name))
    return returns, params, trains


def split_codes(text: str) -> list[str]:
    """`t,(t,b),-` -> ["t", "(t,b)", "-"]: the top-level codes of a list."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


# --------------------------------------------------------------------------- decoding
class Decoder:
    """Values of codes, in the file that reads them."""

    def __init__(self, classes: dict[str, ClassInfo]) -> None:
        self.classes = classes
        self.loaders: dict = {}

    def value(self, code: str, passed: Lookup | None = None,
              param: tuple[str, int, str] | None = None, returned: tuple[str, int] | None = None) -> Value:
        """The value of `code`; `passed` gives what a call passes for a parameter (`$i:name`),
        `param`: the parameter the value is bound to, `returned`: the function (as this file
        calls it) whose return value it is (a loader remembers either)."""
        if not code:
            return UNKNOWN
        head = code[0]
        if code == "t":
            return TENSOR
        if code == ON_ACCELERATOR:
            return Value(Kind.TENSOR, device="accel")
        if code == "b":
            return BOOL_TENSOR
        if code == "c":
            return Value(Kind.TENSOR, device="cpu")
        if code == "B":
            return Value(Kind.BATCH)
        if code == "Bc":
            return Value(Kind.BATCH, device="cpu")
        if code == "B" + ON_ACCELERATOR:
            return Value(Kind.BATCH, device="accel")
        if code == PYTHON_CODE:
            return PYTHON
        if code == NDARRAY_CODE:
            return _RETURNED_ARRAY
        if head == "{" and code.endswith("}"):
            return Value(Kind.PYTHON, elem=self.value(code[1:-1], passed))
        if head == "L" and len(code) == 4:
            return loader_value(code[1:], self.loaders, param, returned)
        if head == PROJECT_CLASS and len(code) > 1:
            return Value(Kind.UNKNOWN, ref=code)
        if head == LOCAL_CLASS:
            cls = self.classes.get(code[1:])
            return cls.instance() if cls is not None and cls.top_level else UNKNOWN
        if head == "(" and code.endswith(")"):
            items = split_codes(code[1:-1])
            if returned is not None and returned[1] < 0:  # the whole return value: its items
                return tuple_of(tuple(self.value(c, passed, returned=(returned[0], i)) for i, c in enumerate(items)))
            return tuple_of(tuple(self.value(c, passed) for c in items))
        if head == "[" and code.endswith("]"):
            inner = code[1:-1]
            if inner.startswith("*$") and passed is not None:
                position, _, name = inner[2:].partition(":")
                argument = passed(position, name)
                if argument is not None and argument.kind is Kind.LOADER:
                    return argument  # re-yields a loader's batches: the same iteration
            return seq_of(self.value(inner, passed))
        if head in "$*" and passed is not None:
            element = head == "*"
            position, _, name = code[2 if element else 1:].partition(":")
            argument = passed(position, name)
            if argument is None:
                return UNKNOWN
            return element_of(argument) if element else argument
        return UNKNOWN


# --------------------------------------------------------------------------- joins
def join_codes(a: str, b: str) -> str:
    """The least code above both (the project pass joins what each round found)."""
    if a == b or not b or b == NOTHING:
        return a
    if not a or a == NOTHING:
        return b
    if CONFLICT in (a, b):
        return CONFLICT
    tensors = {"t", "b", "c", ON_ACCELERATOR}
    if a in tensors and b in tensors:
        return "t"
    if a[0] == b[0] == "B" and {a, b} <= {"B", "Bc", "B" + ON_ACCELERATOR}:
        return "B"
    if a[0] == "L" and b[0] == "L" and len(a) == len(b) == 4:
        # pinned if either is: a copy of its batches without non_blocking blocks for that one
        pin = "T" if "T" in (a[1], b[1]) else a[1] if a[1] == b[1] else CONFLICT
        return "L" + pin + "".join(x if x == y else CONFLICT for x, y in zip(a[2:], b[2:]))
    if a[0] == b[0] == "(" and a[-1] == b[-1] == ")":
        left, right = split_codes(a[1:-1]), split_codes(b[1:-1])
        if len(left) == len(right):
            return "(" + ",".join(join_codes(x, y) for x, y in zip(left, right)) + ")"
    if a[0] == b[0] == "[" and a[-1] == b[-1] == "]":
        return "[" + join_codes(a[1:-1], b[1:-1]) + "]"
    if a[0] == b[0] == "{" and a[-1] == b[-1] == "}":
        inner = join_codes(a[1:-1], b[1:-1])
        return "{" + inner + "}" if inner != CONFLICT else CONFLICT
    return CONFLICT


def join_summaries(a: str, b: str) -> str:
    if a == b:
        return a
    trains = a.endswith(TRAINS) or b.endswith(TRAINS)
    returns_a, _, moved_a = a.removesuffix(TRAINS).partition(MOVES)
    returns_b, _, moved_b = b.removesuffix(TRAINS).partition(MOVES)
    moved = sorted(set(filter(None, moved_a.split(","))) | set(filter(None, moved_b.split(","))))
    returns = join_codes(returns_a, returns_b)
    return returns + (MOVES + ",".join(moved) if moved else "") + (TRAINS if trains else "")


# A summary that only says "tensors" (`t`, `(t,t)`, `[t]`) is not exported: most callers
# already treat an unknown value in torch code as a possible tensor, and the answer would cost
# a second analysis of every file calling a helper from hot code (measured on torchvision and
# pyro: +12% cold time, no finding more). Masks, host tensors, batches, loaders, objects and
# parameters are worth it.
PLAIN = "t()[],-?"


def export(functions: Iterable[FunctionInfo], moves: set[tuple[str, int, str]],
           annotated: Callable[[FunctionInfo], Value | None]) -> tuple[str, ...]:
    """`Name=summary` for each function of the file other files may call, when there is
    something to say (`annotated`: the value a function's return annotation gives)."""
    moved: dict[str, list[str]] = {}
    for moved_key, position, name in sorted(moves):
        moved.setdefault(moved_key, []).append(f"${position}:{name}")
    functions = list(functions)
    nested = {(id(f.parent), f.name) for f in functions if f.parent is not None}
    out = []
    for func in functions:
        key = function_key(func)
        if key is None:
            continue
        result = func.result
        if result.kind in (Kind.UNKNOWN, Kind.NONE) and not has_markers(result) \
                and not (result.ref or "").startswith(PROJECT_CLASS):
            result = annotated(func) or result
        returns = code_of(result, func)
        if result.kind is Kind.FUNC and result.ref and (id(func), result.ref) in nested:
            returns = CLOSURE + result.ref  # the function it defines: "f=&train"
        cls = func.cls
        if func.name == "forward" and cls is not None and cls.is_module and cls.lookup_method("__call__") is None:
            # Calling `Generator(h).to(device)` in another file runs this: a model's output,
            # even when it says no more than "a tensor" (a class whose name does not say
            # "module" is otherwise an object of unknown kind there)
            out.append(f"{cls.name}.__call__={returns if informative(returns) else 't'}")
        if not informative(returns) or not returns.strip(PLAIN):
            returns = NOTHING
        # One call runs a training step: a loop in another file calling it is a training loop
        # (only the backward pass or an optimizer step counts: a function that merely runs a
        # model is exported by most model files and would cost every caller a second analysis).
        trains = func.trains and not func.loops_steps and not func.loads_model
        if returns == NOTHING and key not in moved and not trains:
            continue
        out.append(f"{key}={returns}" + (MOVES + ",".join(moved[key]) if key in moved else "")
                   + (TRAINS if trains else ""))
    return tuple(sorted(set(out)))


__all__ = ["CLOSURE", "Decoder", "ON_ACCELERATOR", "PLAIN", "PROJECT_CLASS", "TRAINS", "call_lookup", "code_of", "export", "function_key",
           "has_markers", "informative", "instantiate", "join_codes", "join_summaries", "made_elsewhere",
           "param_marker", "param_of", "parameter_of", "parameters", "split_codes", "split_summary", "vague"]
