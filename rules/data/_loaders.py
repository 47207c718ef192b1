"""Shared helpers for the input-pipeline rules: from a batch moved to the device in hot code
back to the `DataLoader(...)` call that produced it, and that call's arguments.

The link is the analyzer's `Value.origin`: a loader made by `torch.utils.data.DataLoader(...)`
in this file, and every batch it yields, remember that call. A loader built in another file
and passed here (or returned by its function) remembers a made-up call with the same facts
(`made_elsewhere`): it tells whether the batches are pinned, but a finding about the loader
itself belongs to its file, which sees the moves as the calls that hand the loader over, or
as the loader it returns to a caller that moves its batches (`RuleContext.loaders_fed_by`).
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

from perflint.facts.context import RuleContext
from perflint.facts.loader_settings import ABSENT, UNREAD, star_settings
from perflint.facts.summaries import made_elsewhere
from perflint.facts.syntax import assigned_values, dotted
from perflint.facts.values import Kind, same_loader_settings

from ._moves import Move, device_move, has_star, keyword, root_name, written_after

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
#            pin_memory, drop_last, timeout, worker_init_fn, ...): positions of the ones we read.
POSITIONS = {"num_workers": 5, "collate_fn": 6, "pin_memory": 7}


class Unknown(enum.Enum):
    """An argument whose value cannot be read (`**kwargs`, a variable). One member, so that
    `x is UNKNOWN` narrows the type."""

    UNKNOWN = "unknown"


UNKNOWN = Unknown.UNKNOWN


def loader_batch_move(call: ast.Call, ctx: RuleContext, *, foreign: bool = False) -> tuple[Move, ast.Call] | None:
    """(the move, the DataLoader call) when `call` moves a batch of a DataLoader made in this
    file (`foreign`: or in another file) to a device that may be an accelerator."""
    move = device_move(call, ctx)
    if move is None or move.method == "type_as":
        return None
    value = ctx.value(move.receiver)
    if value.kind is not Kind.BATCH or not isinstance(value.origin, ast.Call):
        return None
    if value.on_accel:
        return None  # `y = y.cuda(non_blocking=True)` ... `y.cuda()`: already there, no copy
    if made_elsewhere(value.origin) and not foreign:
        return None
    return move, value.origin


def fed_loaders(call: ast.Call, ctx: RuleContext) -> list[ast.Call]:
    """The DataLoader calls of this file whose batches `call` moves to a device every step:
    the loader of the batch it moves, the loaders it hands to a function of another file
    that moves their batches every step, or to accelerate's `prepare()`. Not those whose
    dataset already returns device tensors (`device_dataset`): moving them again is free."""
    prepared = accelerate_prepared(call, ctx)
    if prepared is not None:  # `accelerator.prepare(loader)` (none when it moves nothing to a GPU)
        loaders = prepared.loaders
    else:
        found = loader_batch_move(call, ctx)
        loaders = [found[1]] if found is not None else []
        loaders += [loader for loader in ctx.loaders_fed_by(call) if loader not in loaders]
        loaders += [twin for loader in loaders for twin in _twins(loader, ctx) if twin not in loaders]
    return [loader for loader in loaders if not device_dataset(loader, ctx)]


def _twins(loader: ast.Call, ctx: RuleContext) -> list[ast.Call]:
    """`loader = DataLoader(ds, shuffle=False, ...)` on one branch, `loader = DataLoader(ds,
    shuffle=True, ...)` on the other, with the same settings: the analysis follows the first
    for both (`perflint.facts.values.join`), the findings are on each."""
    statement = ctx.parent(loader)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)) or made_elsewhere(loader):
        return []
    scope = _enclosing_scope(statement, ctx)
    if scope is None:
        return []
    name = statement.targets[0].id
    found = []
    for node in ast.walk(scope):
        if node is statement or not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Call) \
                and same_loader_settings(loader, value):
            found.append(value)
    return found


# `accelerator.prepare(model, optimizer, loader)`: accelerate wraps the loader in a
# `DataLoaderShard` whose iterator copies each batch to the device (`send_to_device(...,
# non_blocking=dataloader_config.non_blocking)`, False by default).
_ACCELERATE_PREPARE = frozenset({"accelerate.Accelerator.prepare", "accelerate.Accelerator.prepare_data_loader"})
_ACCELERATOR = "@accelerate.Accelerator"  # the value of `Accelerator(...)`


@dataclass(frozen=True)
class PreparedLoaders:
    """The DataLoader calls of this file an `accelerator.prepare(...)` call hands over, and
    the `Accelerator(...)` call that made the accelerator (None when it is not known here)."""

    loaders: list[ast.Call]
    accelerator: ast.Call | None


def accelerate_prepared(call: ast.Call, ctx: RuleContext) -> PreparedLoaders | None:
    """For `accelerator.prepare(..., loader, ...)`, the loaders whose batches accelerate copies
    to the device every step (none when device placement is off); None for any other call."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in ("prepare", "prepare_data_loader"):
        return None
    if ctx.value(call.func.value).ref != _ACCELERATOR and ctx.call_name(call) not in _ACCELERATE_PREPARE:
        return None
    accelerator = _accelerator_call(ctx)
    if keyword(call, "device_placement") is not None or has_star(call):
        return PreparedLoaders([], accelerator)  # placement chosen per object: not read
    if accelerator is not None and (literal(argument_of(accelerator, "device_placement")) is False
                                    or literal(argument_of(accelerator, "cpu")) is True):
        return PreparedLoaders([], accelerator)
    loaders = []
    for arg in call.args:
        value = ctx.value(arg)
        if value.kind is Kind.LOADER and isinstance(value.origin, ast.Call) and not made_elsewhere(value.origin) \
                and dotted(value.origin.func).endswith("DataLoader") and not _python_items(value.origin, ctx):
            loaders.append(value.origin)
    return PreparedLoaders(loaders, accelerator)


# What a dataset's `__getitem__` may call and still hand out Python values only.
_PYTHON_ITEM_CALLS = frozenset({"dict", "list", "tuple", "str", "int", "float", "len", "range", "min", "max"})


def _python_items(loader: ast.Call, ctx: RuleContext) -> bool:
    """`DataLoader(PromptDataset(prompt, n))` with a dataset class of this file whose
    `__getitem__` calls nothing but builtins (`{"prompt": self.prompt, "index": index}`): its
    batches are strings and a few ints, nothing worth pinning (DreamBooth's class-image
    prompts)."""
    dataset = _dataset_argument(loader)
    if isinstance(dataset, ast.Name):  # `sample_dataset = PromptDataset(...)` just before
        scope = _enclosing_scope(loader, ctx)
        made = [n.value for n in ast.walk(scope) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == dataset.id for t in n.targets)] if scope else []
        dataset = made[0] if len(made) == 1 else None
    if not (isinstance(dataset, ast.Call) and isinstance(dataset.func, ast.Name)):
        return False
    classes = [n for n in ctx.module_node.body if isinstance(n, ast.ClassDef) and n.name == dataset.func.id]
    methods = [m for c in classes for m in c.body if isinstance(m, ast.FunctionDef) and m.name == "__getitem__"]
    if len(methods) != 1:
        return False
    return all(isinstance(n.func, ast.Name) and n.func.id in _PYTHON_ITEM_CALLS
               for n in ast.walk(methods[0]) if isinstance(n, ast.Call))


def _accelerator_call(ctx: RuleContext) -> ast.Call | None:
    """The file's one `Accelerator(...)` call (a script makes one), else None."""
    found = [n for n in ast.walk(ctx.module_node) if isinstance(n, ast.Call)
             and ctx.call_name(n) in ("accelerate.Accelerator", "accelerate.accelerator.Accelerator")]
    return found[0] if len(found) == 1 else None


def argument_of(call: ast.Call, name: str) -> ast.expr | None | Unknown:
    """A keyword-only argument of a call that is not a DataLoader (UNKNOWN behind `**`)."""
    kw = keyword(call, name)
    if kw is not None:
        return kw.value
    return UNKNOWN if any(k.arg is None for k in call.keywords) else None


def argument(loader: ast.Call, name: str) -> ast.expr | None | Unknown:
    """The expression passed for `name`: None when absent (the default), UNKNOWN when a
    `*args` / `**kwargs` may hold it."""
    kw = keyword(loader, name)
    if kw is not None:
        return kw.value
    position = POSITIONS[name]
    positional = loader.args
    starred = next((i for i, a in enumerate(positional) if isinstance(a, ast.Starred)), None)
    if starred is not None and starred <= position:
        return UNKNOWN
    if len(positional) > position:
        return positional[position]
    if any(k.arg is None for k in loader.keywords):
        return UNKNOWN
    return None


def literal(node: ast.expr | None | Unknown) -> object:
    """The literal value of an argument (None when absent), or UNKNOWN."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    return UNKNOWN


def choices(loader: ast.Call, name: str) -> frozenset | Unknown:
    """The literal values `name` may have (None: not given, the default), or UNKNOWN.

    `DataLoader(ds, **kwargs)` with `kwargs` a dict built in the same function
    (`perflint.facts.loader_settings`): each path's value; a key set under an `if` has both
    its old and its new value."""
    given = argument(loader, name)
    if given is not UNKNOWN:
        value = literal(given)
        return UNKNOWN if value is UNKNOWN else frozenset({value})
    if keyword(loader, name) is None and not any(isinstance(a, ast.Starred) for a in loader.args):
        settings = star_settings(loader)
        if settings is not None and len(loader.args) <= POSITIONS[name]:
            found = settings.get(name, frozenset({ABSENT}))
            if UNREAD in found:
                return UNKNOWN
            return frozenset(None if v is ABSENT else v for v in found)
    return UNKNOWN


def pins_memory(loader: ast.Call) -> bool:
    """Pinned on some path and known on all of them."""
    found = choices(loader, "pin_memory")
    return found is not UNKNOWN and any(v is True for v in found) and all(v is None or type(v) is bool for v in found)


def host_copy_may_be_mutated(move: Move, ctx: RuleContext) -> bool:
    """Could the host tensor being copied be written after the copy is queued?

    A non-blocking copy reads the pinned source later, on the stream; a write to it in
    between (`x.mul_(2)`, `x[0] = 1`, `x += 1`, `out=x`) would race. Conservative: any such
    write after the move in the same function to the moved name, or to a loop variable of
    a loop around the move, counts.
    """
    function = ctx.function_node
    root = root_name(move.receiver)
    if function is None or root is None:
        return True
    names = {root}
    for node in ast.walk(function):
        if isinstance(node, (ast.For, ast.AsyncFor)) and _contains(node, move.call):
            names.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
    return written_after(names, move.call, function)


# Datasets whose items are rows of tensors already in memory: nothing to read, decode or
# augment, so worker processes would only add the cost of sending each batch back.
_IN_MEMORY_DATASETS = frozenset({"TensorDataset", "StackDataset"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)


def in_memory_dataset(loader: ast.Call, ctx: RuleContext) -> bool:
    """`DataLoader(TensorDataset(x, y))`, also through a name assigned in the loader's
    function or a local function that returns one (`-> TensorDataset`)."""
    dataset = _dataset_argument(loader)
    if dataset is None or made_elsewhere(loader):
        return False
    return _holds_rows(dataset, _enclosing_scope(loader, ctx), ctx, depth=0)


def device_dataset(loader: ast.Call, ctx: RuleContext) -> bool:
    """`DataLoader(ds)` whose dataset, a class of this file, returns items it moved to a
    device (`def __getitem__(...): return seq.cuda()`, as lucidrains' training scripts do):
    the batches are on the GPU already, and neither pinning (it fails on CUDA tensors) nor
    worker processes (CUDA in a forked worker fails) apply."""
    dataset = _dataset_argument(loader)
    if dataset is None or made_elsewhere(loader):
        return False
    for name in _constructed_classes(dataset, _enclosing_scope(loader, ctx), depth=0):
        cls = ctx.analysis.classes.get(name)
        getitem = cls.lookup_method("__getitem__") if cls is not None else None
        if getitem is not None:
            result = getitem.result
            items = result.items or () if result.kind is Kind.SEQ else (result,)
            if any(item.on_accel for item in items):
                return True
    return False


def _constructed_classes(expr: ast.expr, scope: ast.AST | None, depth: int) -> list[str]:
    """The names of the classes `expr` is an instance of: `Dataset(...)`, or a name bound to one."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return [expr.func.id]
    if isinstance(expr, ast.Name) and scope is not None and depth < 3:
        return [name for value in assigned_values(scope, expr.id)
                for name in _constructed_classes(value, scope, depth + 1)]
    return []


def _dataset_argument(loader: ast.Call) -> ast.expr | None:
    given = loader.args[0] if loader.args else keyword(loader, "dataset")
    return given.value if isinstance(given, ast.keyword) else given


def _enclosing_scope(node: ast.AST, ctx: RuleContext) -> ast.AST | None:
    """The function (or module) `node` is in."""
    scope = ctx.parent(node)
    while scope is not None and not isinstance(scope, _SCOPES):
        scope = ctx.parent(scope)
    return scope


def _holds_rows(expr: ast.expr, scope: ast.AST | None, ctx: RuleContext, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, ast.Call):
        if dotted(expr.func).rsplit(".", 1)[-1] in _IN_MEMORY_DATASETS:
            return True
        if isinstance(expr.func, ast.Name):
            made_by = [f.node for f in ctx.analysis.functions
                       if f.name == expr.func.id and f.cls is None and not isinstance(f.node, ast.Module)]
            return len(made_by) == 1 and _returns_rows(made_by[0], ctx, depth + 1)
        return False
    if isinstance(expr, ast.Name) and scope is not None:
        bound = assigned_values(scope, expr.id)
        return bool(bound) and all(_holds_rows(value, scope, ctx, depth + 1) for value in bound)
    return False


def _returns_rows(function: ast.AST, ctx: RuleContext, depth: int) -> bool:
    returns = getattr(function, "returns", None)
    if returns is not None and dotted(returns).rsplit(".", 1)[-1] in _IN_MEMORY_DATASETS:
        return True
    values = [node.value for node in ast.walk(function) if isinstance(node, ast.Return)]
    return bool(values) and all(v is not None and _holds_rows(v, function, ctx, depth) for v in values)


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    o_start = (outer.lineno, outer.col_offset)  # type: ignore[attr-defined]
    o_end = (outer.end_lineno, outer.end_col_offset)  # type: ignore[attr-defined]
    i_start = (inner.lineno, inner.col_offset)  # type: ignore[attr-defined]
    return o_start <= i_start <= o_end


__all__ = ["loader_batch_move", "fed_loaders", "accelerate_prepared", "argument_of", "PreparedLoaders", "argument", "literal", "choices", "pins_memory", "host_copy_may_be_mutated",
           "in_memory_dataset", "UNKNOWN", "has_star"]
