"""Hot-path decisions over the analysis' records: which functions are hot by themselves,
which loops are step loops, and which blocks inside a hot region still run only once.

The walkers ask these while they interpret; the name tables and the shape tests that need
no values are in `hotness`.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Mapping

from .framework_hooks import every_iteration_decorator, every_step_hook, hook_kinds
from .hotness import (
    COLD_METHODS,
    FEW_STEPS,
    HOT_METHODS,
    STEP_COUNTER,
    is_loss_function_name,
    receiver_name,
    terminates,
)
from .hints import names_a_batch
from .records import ClassInfo, FunctionInfo, LoopInfo
from .shapes import is_scalar_literal
from .summaries import function_key
from .syntax import walk_nodes
from .values import Kind, Value


# ----------------------------------------------------------------- functions
def seed_reason(func: FunctionInfo, hot_functions: Mapping[str, object], imports_torch: bool,
                is_test: bool, in_test_file: bool = False) -> str:
    """Why `func` runs every step whoever calls it in this file ("" when nothing says so):
    a module's `forward`, a loss, an optimizer's `step`, a function other files call every
    step (`hot_functions`), a training step. `is_test`: it is a test function;
    `in_test_file`: it is in pytest's file (a helper that trains once checks a result)."""
    name, cls = func.name, func.cls
    if name == "state_dict" and cls is not None and cls.top_level and f"{cls.name}.{name}" in hot_functions \
            and not is_test:
        # called every step on an object of this very class from another file (Swin's
        # `loss_scaler.state_dict()["scale"]` on its GradScaler wrapper): not a checkpoint
        return f"`{cls.name}.{name}` is called every step from another module"
    if name in COLD_METHODS or is_test:
        return ""  # `__init__`; `test_ctc_loss` tests a loss, it is not one
    if func.registered_hot:
        return func.registered_hot
    if every_iteration_decorator(func.node):
        return f"ignite handler `{func.display_name}` runs every iteration"
    key = function_key(func) if cls is None else None
    if key is not None and key in hot_functions:
        # (a nested function too: BigGAN's `train = train_fns.GAN_training_function(...)`,
        # then `train(x, y)` every step, is "GAN_training_function.train")
        return f"`{key}` is called every step from another module"
    if func.trains and _is_named_training_step(func) and not func.loops_steps and not func.loads_model \
            and not in_test_file and not (cls is not None and (cls.is_data_pipeline or _is_test_case(cls))):
        # `StandardTrainStep.__call__(task)` found through a registry, an optimizer wrapper's
        # `step()`: one call is one step, whoever makes it
        return f"`{func.display_name}` runs the backward pass or the optimizer step: a training step"
    if cls is not None:
        if in_test_file:
            # a toy model in pytest's file, a test class's `get_dummy_inputs()` a testing mixin
            # calls: the tests call them to check a result, not to train
            return ""
        if cls.top_level and f"{cls.name}.{name}" in hot_functions:
            return f"`{cls.name}.{name}` is called every step from another module"
        if cls.is_autograd_function and name in ("forward", "backward"):
            return f"autograd Function `{cls.name}.{name}`"
        if cls.is_data_pipeline:
            return ""  # `BaseTransform.forward(data)` runs in the data pipeline
        hook = every_step_hook(name, class_hook_kinds(cls))
        if hook is not None:
            framework, unit = hook
            return f"{framework} `{cls.name}.{name}` runs every {unit}"
        # `forward_train`, `forward_features` of a module; not `Masker.forward_single_image` of
        # a class with no base at all (maskrcnn-benchmark's post-processing helper), nor a
        # decoding or test entry point (fairseq's `forward_decoder`, which only its sequence
        # generator calls: hot when `forward` or a hot loop calls it)
        plain = not cls.base_names or cls.base_names == ["object"]
        forward = name == "forward" or (name.startswith("forward_") and not plain and not _NOT_A_STEP.match(name))
        if (name in HOT_METHODS or forward) and (cls.is_module or imports_torch) \
                and not (forward and func.loops_steps):
            # (a trainer module whose `forward()` runs the training loop is not one step: its
            # loop is, byol-pytorch's `BYOLTrainer.forward`; a `train_step` is one by its name)
            return f"`{cls.name}.{name}` runs every step"
        if name == "__call__" and cls.is_loss:
            return f"loss `{cls.name}.__call__`"
        if name == "step" and cls.is_optimizer:
            return f"optimizer `{cls.name}.step`"
        if name == "step" and cls.is_scheduler:
            return f"scheduler `{cls.name}.step` runs every (denoising) step"
        if name in ("update", "_update") and cls.is_metric:
            return f"metric `{cls.name}.{name}` runs every batch"
        if is_loss_function_name(name) and (cls.is_module or imports_torch) and not func.loops_steps:
            return f"loss method `{cls.name}.{name}`"
        return ""
    # `train_cosine_loss(model, loader)` loops over the data: a training routine
    if func.parent is None and is_loss_function_name(name) and imports_torch and not func.loops_steps:
        return f"loss function `{name}`"
    return ""


_NOT_A_STEP = re.compile(r"forward_+(?:test|simple_test|aug_test|infer|inference|predict|generate|decode|decoder|"
                         r"export|onnx|dummy|eval)(?:_|$)")
_FIRST_STEP_FLAG = re.compile(r"_*(?:is_)?first_(?:batch|step|iter|iteration|epoch|call|run)$")
_TRAINING_STEP_NAME = re.compile(r"train(?:ing)?_?step|run_step|optimi[sz]er_?step|optimi[sz]e_param(?:eter)?s|"
                                 r"update_?(?:step|param(?:eter)?s)")
# Methods that are one update of a learner when they run the backward pass or the optimizer
# step themselves: DomainBed's `Algorithm.update(minibatches)`, an RL agent's `learn()`.
_UPDATE_METHOD = frozenset({"update", "_update", "learn", "update_model", "train_one_step"})


def _is_named_training_step(func: FunctionInfo) -> bool:
    """Named as one training step: `train_step`, `run_optimizer_step`, `run_step`,
    `optimize_parameters`, `__call__` of a `StandardTrainStep`, the `step()` of an optimizer
    wrapper, a learner's `update()` or `learn()` (a call that is not so named,
    `warmup()` or `loss_scaler(...)`, is per-step only if hot code calls it)."""
    name, cls = func.name, func.cls
    if _TRAINING_STEP_NAME.search(name.lower()):
        return True
    if cls is None:
        return False
    return name == "step" or name in _UPDATE_METHOD \
        or (name == "__call__" and bool(_TRAINING_STEP_NAME.search(cls.name.lower())))


def _is_test_case(cls: ClassInfo) -> bool:
    return any(b.rsplit(".", 1)[-1] == "TestCase" for b in cls.base_names)


def class_hook_kinds(cls: ClassInfo) -> frozenset[str]:
    """What kind of hook or callback object `cls` is (see `framework_hooks.hook_kinds`), from its
    name and its bases', through the bases defined in the same file."""
    lineage = list(cls.lineage())
    return hook_kinds([c.name for c in lineage], [b for c in lineage for b in c.base_names])


def in_test_or_data_pipeline(func: FunctionInfo | None, is_test: Callable[[FunctionInfo], bool]) -> bool:
    """A test (`def test_...` in a test file, a `unittest.TestCase` method): its loops check results,
    they are not a training or inference loop. Nor are the loops of a dataset's or a
    data transform's methods (`Dataset.process()` preparing files once)."""
    while func is not None:
        if is_test(func):
            return True
        if func.cls is not None and (func.cls.is_data_pipeline or _is_test_case(func.cls)):
            return True
        func = func.parent
    return False


# ----------------------------------------------------------------- loops
def is_data(iterable: Value, elem: Value) -> bool:
    """Does iterating this yield batches of data (a DataLoader, `enumerate(loader)`, ...)?"""
    if iterable.kind is Kind.LOADER or (elem.data and elem.kind is not Kind.NDARRAY):
        return True
    if elem.kind is Kind.SEQ and elem.items is not None:
        return any(item.data and item.kind is not Kind.NDARRAY for item in elem.items)
    return False


def yields_named_batches(target: ast.expr, elem: Value) -> bool:
    """`for batch in lp:` / `for idx, batch in enumerate(progress):` over something nothing
    else is known of: the loop's own name for what it gets says it iterates the data."""
    if isinstance(target, ast.Tuple) and target.elts:
        target = target.elts[-1]
        if elem.kind is Kind.SEQ and elem.items:
            elem = elem.items[-1]
    return isinstance(target, ast.Name) and names_a_batch(target.id) and elem.kind is Kind.UNKNOWN


def is_step_loop(loop: LoopInfo) -> bool:
    """Does one iteration of `loop` run one step (read after the pre-walk of its body has
    filled its markers in)?"""
    # A loop over the data is. A loop around a loop over the data is an epoch loop: the
    # model calls in its own body (validation) run once per epoch -- unless it runs the
    # backward pass or steps the optimizer itself: then the loop inside is a validation
    # (`if step % n == 0: validate(model, val_loader)`) and this one is the training loop.
    return loop.data or (loop.direct_markers and (not loop.nested_data or loop.update_markers) and (
        # A loop that only runs a model (`vae.decode`) around a loop that runs one per
        # step (the denoising loop) is a loop over chunks, not over steps; one that also
        # steps the optimizer around a micro-batch loop is the training loop.
        loop.train_markers or not loop.nested_markers))


# ----------------------------------------------------------------- blocks
def is_once_test(test: ast.expr, loops: list[LoopInfo], value_of: Callable[[ast.expr], Value]) -> bool:
    """`if step == 0:` / `if batch_idx < 3:` on a step counter runs once (or a few
    times), not every step. `x.ndim == 4`, `B == 1` or the index of a loop over layers
    are not step counters: what they guard runs every step. `if plots and batch_i < 3:`
    runs at most as often as its step-counter test."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(is_once_test(operand, loops, value_of) for operand in test.values)
    if isinstance(test, (ast.Name, ast.Attribute)) and _FIRST_STEP_FLAG.match(receiver_name(test).lower()):
        return True  # `if first_batch and is_rank_zero():` saves the samples of one batch
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.In) and isinstance(left, ast.Name) and STEP_COUNTER.search(left.id.lower()) \
            and not isinstance(right, (ast.Call, ast.Compare)):
        # `if batch_idx in self.val_log_indices:` a few chosen steps (not `in range(...)`)
        return value_of(left).kind in (Kind.PYTHON, Kind.UNKNOWN)
    if isinstance(op, ast.Eq) and (_is_last_step(left) or _is_last_step(right)):
        # `if i == len(loader) - 1:` / `if i + 1 == len(loader):` the last step of an epoch
        left = right if _is_last_step(left) else left
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and isinstance(left.right, ast.Constant):
            left = left.left
        if isinstance(left, ast.Name) and value_of(left).kind in (Kind.PYTHON, Kind.UNKNOWN):
            # compared with a length, it is a count: the step loop's own variable
            # (`for i, (x, y) in pbar:` with `pbar = tqdm(enumerate(loader))`) counts steps
            loop = next((lp for lp in reversed(loops) if left.id in lp.targets or left.id in lp.counters), None)
            if loop is not None:
                return loop.root_hot or loop.data
    else:
        if isinstance(left, ast.Constant):
            left, right = right, left
            op = {ast.Gt: ast.Lt(), ast.GtE: ast.LtE()}.get(type(op), op)
        if not (isinstance(right, ast.Constant) and type(right.value) is int):
            return False
        if not (isinstance(op, ast.Eq) or (isinstance(op, (ast.Lt, ast.LtE)) and right.value <= FEW_STEPS)):
            return False
    if not isinstance(left, (ast.Name, ast.Attribute)):
        return False
    # (a counter restored from a checkpoint, `self.global_step = ckpt["global_step"]`, is not
    # known to be a number, but is still not a tensor)
    if value_of(left).kind not in (Kind.PYTHON, Kind.UNKNOWN):
        return False
    if isinstance(left, ast.Name):
        loop = next((lp for lp in reversed(loops) if left.id in lp.counters), None)
        if loop is not None:  # the index of the step loop, not of a loop inside the step
            return loop.root_hot or loop.data
        return bool(STEP_COUNTER.search(left.id.lower()))
    return bool(STEP_COUNTER.search(left.attr.lower()))


def is_capped_by_counter(node: ast.If, loops: list[LoopInfo], func_node: ast.AST) -> bool:
    """`if not correct[i] and shown < 5: shown += 1; print(...)`: a block that counts its own
    runs against a small cap runs at most that many times, not every step. Not when the
    count starts again inside the step loop (`shown = 0` in its body) or, for a local count in
    a function that is one step itself, on every call; `self.warned` counts across calls
    unless the function resets it."""
    counter = _capped_counter(node.test)
    if counter is None or not any(_counts_up(stmt, counter) for stmt in _own_statements(node.body)):
        return False
    if isinstance(counter, ast.Name):
        step_loop = next((loop for loop in loops if loop.root_hot or loop.data), None)
        return step_loop is not None and not _resets(step_loop.node, counter)
    return not _resets(func_node, counter)


def clears_its_flag(node: ast.If, loops: list[LoopInfo]) -> bool:
    """`if prefill_token: prefill_token = False; input_pos = torch.tensor(...)` (litgpt's
    generation loop), `if self.first: self.first = False; ...`: a branch that turns its own
    flag off runs once, not every step. Not when the step loop sets a local flag again (it
    would run every step), nor for a local flag outside a loop (once per call)."""
    flag = node.test
    if not (isinstance(flag, ast.Name) or (isinstance(flag, ast.Attribute) and isinstance(flag.value, ast.Name))):
        return False
    if not any(_turns_off(stmt, flag) for stmt in node.body):
        return False
    if isinstance(flag, ast.Attribute):
        return True
    loop = loops[-1] if loops else None
    return loop is not None and not any(
        _same_place(target, flag) and not _turns_off(stmt, flag)
        for stmt in walk_nodes(loop.node) if isinstance(stmt, ast.Assign) for target in stmt.targets
    )


def fills_a_local_once(node: ast.If, loops: list[LoopInfo]) -> bool:
    """`if features is None: features = torch.zeros(n, d).cuda()` in a loop (dino's
    `extract_features`, also under `and`): the first step fills the local, the others skip
    the branch. Not when the loop sets the local again elsewhere."""
    tests = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) \
        else [node.test]
    names = [t.left for t in tests if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Is)
             and isinstance(t.left, ast.Name) and isinstance(t.comparators[0], ast.Constant)
             and t.comparators[0].value is None]
    if not names or not loops:
        return False
    inside = {id(n) for n in walk_nodes(node)}
    for name in names:
        assigned = [target for stmt in walk_nodes(loops[-1].node) if isinstance(stmt, ast.Assign)
                    for target in stmt.targets if _same_place(target, name)]
        if assigned and all(id(target) in inside for target in assigned):
            return True
    return False


def sets_a_stored_sentinel(node: ast.If, function: ast.AST) -> bool:
    """`Z = self.params[2].item()` ... `if Z < 0: self.params[2] = out.mean() * n` (the NCE
    memory banks of CMC and CRD): a value kept on the object at a sentinel until the first
    step sets it, so the branch runs once."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
            and is_scalar_literal(test.comparators[0])):
        return False
    stored = {ast.unparse(t) for stmt in node.body for part in walk_nodes(stmt) if isinstance(part, ast.Assign)
              for t in part.targets if isinstance(t, (ast.Subscript, ast.Attribute)) and _on_self(t)}
    if not stored:
        return False
    name = test.left.id
    inside = {id(part) for part in walk_nodes(node)}
    for part in walk_nodes(function):
        if isinstance(part, ast.Assign) and id(part) not in inside \
                and any(isinstance(t, ast.Name) and t.id == name for t in part.targets):
            read = {ast.unparse(n) for n in walk_nodes(part.value) if isinstance(n, (ast.Subscript, ast.Attribute))}
            if read & stored:
                return True
    return False


def _on_self(node: ast.expr) -> bool:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _turns_off(stmt: ast.AST, flag: ast.Name | ast.Attribute) -> bool:
    """`flag = False` (or 0, or None)."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _same_place(stmt.targets[0], flag) \
        and isinstance(stmt.value, ast.Constant) and not stmt.value.value


def _capped_counter(test: ast.expr) -> ast.Name | ast.Attribute | None:
    """The count in `count < 5` (`count <= 5`, `5 > count`), alone or in an `and`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return next((c for c in map(_capped_counter, test.values) if c is not None), None)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
        op = {ast.Gt: ast.Lt(), ast.GtE: ast.LtE()}.get(type(op), op)
    if not (isinstance(op, (ast.Lt, ast.LtE)) and isinstance(right, ast.Constant) and type(right.value) is int
            and right.value <= FEW_STEPS):
        return None
    if isinstance(left, ast.Name) or (isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name)):
        return left
    return None


def _own_statements(body: list[ast.stmt]):
    """The statements of `body` and of the blocks inside it, not of functions defined there."""
    work = list(body)
    while work:
        stmt = work.pop()
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "finalbody"):
            work.extend(getattr(stmt, field, ()))
        for handler in getattr(stmt, "handlers", ()):
            work.extend(handler.body)


def _counts_up(stmt: ast.stmt, counter: ast.Name | ast.Attribute) -> bool:
    return isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) \
        and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int and stmt.value.value > 0 \
        and _same_place(stmt.target, counter)


def _resets(scope: ast.AST, counter: ast.Name | ast.Attribute) -> bool:
    """Is `counter` assigned (not counted up) anywhere in `scope`?"""
    for node in walk_nodes(scope):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if any(_same_place(t, counter) for t in elements):
                return True
    return False


def _same_place(node: ast.expr, counter: ast.Name | ast.Attribute) -> bool:
    if isinstance(counter, ast.Name):
        return isinstance(node, ast.Name) and node.id == counter.id
    return isinstance(node, ast.Attribute) and node.attr == counter.attr and isinstance(node.value, ast.Name) \
        and isinstance(counter.value, ast.Name) and node.value.id == counter.value.id


def _is_last_step(node: ast.expr) -> bool:
    """`len(x)` or `len(x) - 1`: the bound of a step counter's last value."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Constant):
        node = node.left
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


def leaves_hot_region(body: list[ast.stmt], loops: list[LoopInfo], func_hot: bool) -> bool:
    """A block that raises, or leaves the loop that makes this region hot, runs once."""
    jump = terminates(body)
    if jump is ast.Raise:
        return True
    if jump is ast.Break:
        return bool(loops) and loops[-1].root_hot
    if jump is ast.Return:
        return not func_hot and any(loop.root_hot for loop in loops)
    return False


# ----------------------------------------------------------------- parameters
def parameter_defaults(func: FunctionInfo) -> dict[str, ast.expr | None]:
    """Each parameter of `func` and its default expression (None: no default)."""
    node = func.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    args = node.args
    positional = args.posonlyargs + args.args
    defaults: dict[str, ast.expr | None] = {a.arg: None for a in positional}
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        defaults[arg.arg] = default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
        defaults[arg.arg] = kw_default
    return defaults


def default_decides(test: ast.expr, func: FunctionInfo) -> bool | None:
    """The value of `if mode == "cpu":` / `if debug:` in hot code when `func` is hot only
    through this file's calls and none of them passes that parameter: it holds its constant
    default (YOLOX's `get_assignments(..., mode="gpu")`, whose "cpu" call is an OOM fallback).
    None when that is not known."""
    if func.hot_passed is None or not func.hot_reason.startswith("called from hot code"):
        return None
    negate = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negate = test.operand, True
    if isinstance(test, ast.Name):
        name, compare = test.id, None
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and isinstance(test.comparators[0], ast.Constant) \
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        name, compare = test.left.id, test
    else:
        return None
    defaults = parameter_defaults(func)
    default = defaults.get(name)
    if name not in defaults or name in func.hot_passed or not isinstance(default, ast.Constant):
        return None
    value = default.value
    if compare is None:
        result = bool(value)
    else:
        other = compare.comparators[0].value  # type: ignore[attr-defined]  # a Constant (above)
        op = compare.ops[0]
        same = value is other if isinstance(op, (ast.Is, ast.IsNot)) else value == other
        result = same if isinstance(op, (ast.Eq, ast.Is)) else not same
    return not result if negate else result
