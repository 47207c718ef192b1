"""Syntactic parts of the "does this run every step?" fact.

The data-dependent parts (is this loop iterating a DataLoader? does its body call the
model or `optimizer.step()`?) are decided by the analyzer while it walks; this module holds
the name tables and the shape tests that need no values.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Collection

from .syntax import child_nodes, dotted, walk_nodes

# Methods that run once per training / inference step.
HOT_METHODS = frozenset(
    """forward training_step validation_step test_step predict_step train_step eval_step
    val_step evaluation_step compute_loss prediction_step shared_step _shared_step
    common_step _common_step forward_step training_step_end validation_step_end
    test_step_end""".split()
)
# Methods that never run per step, even when called from hot code by mistake of the call graph
# (`if self.merged: self.unmerge()` in an adapter's forward changes state once).
COLD_METHODS = frozenset(
    """__init__ __post_init__ setup configure_optimizers reset_parameters _init_weights
    init_weights _reset_parameters extra_repr __repr__ __str__ state_dict load_state_dict
    _load_from_state_dict on_train_start on_train_end on_fit_start on_fit_end
    on_validation_epoch_end on_train_epoch_end on_test_epoch_end validation_epoch_end
    training_epoch_end test_epoch_end prepare_data train_dataloader val_dataloader
    test_dataloader from_pretrained save_pretrained merge unmerge merge_and_unload unload
    fuse unfuse fuse_lora unfuse_lora fuse_qkv_projections unfuse_qkv_projections
    load_adapter set_adapter""".split()
)
_LOSS_FUNCTION = re.compile(
    r"(?:^|_)loss(?:es)?$|^loss_|(?:^|_)criterion$"
    # `ctc_loss_kd`, `focal_loss_v2`; not `build_loss_fn` or `loss_weights`
    r"|_loss_(?!(?:fn|func|function|fns|scale|scaler|weight|weights|cfg|config|name|names|type|dict"
    r"|map|registry|factory|class|cls|kwargs|args|key|keys)$)[a-z0-9]+$"
)

# Receivers of `.step()` that mean "one optimizer step" (not an LR scheduler).
_OPTIMIZER_NAME = re.compile(r"optim|(?:^|_)opt(?:_|$)|scaler")
_SCHEDULER_NAME = re.compile(r"sched|lr_|warmup")


# `create_loss`, `build_criterion`, `resolve_classification_loss`: they make a loss, once.
_FACTORY_PREFIX = re.compile(r"^_*(?:create|build|make|get|resolve|init|setup|load|register|parse|"
                             r"configure|select|choose|new|define|construct|instantiate)_")


_TEST_FILE = re.compile(r"(?:^|[/\\])(?:test_[^/\\]*|[^/\\]*_test|conftest)\.py$")


def is_test_file(path: str) -> bool:
    """`test_sync.py`, `model_test.py`, `conftest.py`: pytest's files, whose `test_*`
    functions check results instead of training. (`def test(model, loader)` in a training
    script is its evaluation loop, and stays hot.)"""
    return bool(_TEST_FILE.search(path))


_TRANSFORMS_FILE = re.compile(r"(?:^|[/\\])transforms(?:[/\\]|\.py$)")


def is_transforms_file(path: str) -> bool:
    """`torchvision/transforms/_presets.py`, `timm/data/transforms.py`: data augmentation,
    applied to samples in the data pipeline (`models/detection/transform.py`, which a model
    runs on its batches, is not one)."""
    return bool(_TRANSFORMS_FILE.search(path))


# `update_with_local_losses`, `log_losses`, `plot_losses`: bookkeeping about losses, not a
# loss. Not a seed by its name; a hot caller still makes it hot.
_BOOKKEEPING_PREFIX = re.compile(r"^_*(?:update|log|record|save|plot|print|show|report|write|dump|track|"
                                 r"store|accumulate|reset|visuali[sz]e|summari[sz]e)_")


# Loading a model or its weights: a function that does this (outside its loops) is a run of a
# program (`export.run(weights)`, `evaluate(ckpt)`), not one step, even when it calls the model.
_MODEL_LOADING = re.compile(r"^(?:attempt_load|load_(?:model|models|checkpoint|ckpt|weights|pretrained|network)"
                            r"|from_pretrained|load_state_dict|load_from_checkpoint)$")
_MODEL_LOADING_FUNCTIONS = frozenset({"torch.load", "torch.jit.load", "torch.hub.load", "torch.export.load"})


def is_model_loading_call(name: str, qualname: Callable[[], str | None]) -> bool:
    """`torch.load(path)`, `model.load_state_dict(sd)`, `AutoModel.from_pretrained(...)`,
    `attempt_load(weights)`: `name` is the called name's last part; `qualname` resolves the
    whole name, asked only for a call named `load`."""
    lower = name.lower()
    return bool(_MODEL_LOADING.match(lower)) or (lower == "load" and qualname() in _MODEL_LOADING_FUNCTIONS)


def is_loss_function_name(name: str) -> bool:
    lower = name.lower()
    return bool(_LOSS_FUNCTION.search(lower)) and not _FACTORY_PREFIX.search(lower) \
        and not _BOOKKEEPING_PREFIX.search(lower)


def receiver_name(node: ast.expr) -> str:
    """`self.optimizer` -> "optimizer", `opt` -> "opt"; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def is_optimizer_step_receiver(node: ast.expr) -> bool:
    name = receiver_name(node).lower()
    return bool(name) and bool(_OPTIMIZER_NAME.search(name)) and not _SCHEDULER_NAME.search(name)


def steps_the_optimizer(body: list[ast.stmt]) -> bool:
    """Does this block call `optimizer.step()` / `scaler.step(optimizer)` itself: the body
    of a gradient-accumulation gate (`if (i + 1) % accumulate == 0:`), which runs once per
    optimizer step, not now and then."""
    for stmt in body:
        for node in walk_nodes(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step" \
                    and is_optimizer_step_receiver(node.func.value):
                return True
    return False


def terminates(body: list[ast.stmt]) -> type | None:
    """The kind of jump that ends this block, if its last statement always leaves it."""
    if not body:
        return None
    last = body[-1]
    if isinstance(last, (ast.Raise, ast.Return, ast.Break, ast.Continue)):
        return type(last)
    if _always_fails(last):
        return ast.Raise
    return None


def _always_fails(stmt: ast.stmt) -> bool:
    """`assert False, msg` and `torch._assert(False, msg)`: a raise spelled as an assert."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args:
        call = stmt.value
        if receiver_name(call.func) != "_assert" or not isinstance(
            call.func, (ast.Name, ast.Attribute)
        ):
            return False
        test = call.args[0]
    else:
        return False
    return isinstance(test, ast.Constant) and test.value is False


# `pool.submit(evaluate, y_pred.cpu(), y)`, `loop.run_in_executor(None, f, x)`: the function
# runs in a worker, off the step, and reads what it is handed from host memory
WORKER_HANDOFFS = frozenset({"submit", "apply_async", "map_async", "starmap_async", "run_in_executor"})


# Accelerators other than CUDA's: a branch on one runs only there (`if x.device.type ==
# "mps": x = x.cpu()`), never in a CUDA step. ("cpu" is not one: a batch still on the CPU
# in a CUDA run is the usual reason to test for it.)
_OTHER_DEVICE_TYPES = frozenset({"mps", "xla", "xpu", "npu", "hpu", "meta"})


def is_other_device_test(node: ast.expr, flags: Collection[str] = ()) -> bool:
    """`x.device.type == "mps"`, `"mps" in device.type`, `device_type == "xla"`, or a local
    flag assigned one (`x_is_mps = x.device.type == "mps"`; `flags`)."""
    if isinstance(node, ast.Name):
        return node.id in flags
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return any(is_other_device_test(v, flags) for v in node.values)
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return False
    op, left, right = node.ops[0], node.left, node.comparators[0]
    if isinstance(op, ast.Eq):
        constant, other = (left, right) if isinstance(left, ast.Constant) else (right, left)
    elif isinstance(op, ast.In):
        constant, other = left, right
    else:
        return False
    return isinstance(constant, ast.Constant) and constant.value in _OTHER_DEVICE_TYPES \
        and _names_a_device_type(other)


def _names_a_device_type(node: ast.expr) -> bool:
    """`x.device.type`, `device.type`, `device_type`, `self.device_type`."""
    if isinstance(node, ast.Attribute) and node.attr == "type":
        return "device" in receiver_name(node.value).lower()
    return isinstance(node, (ast.Name, ast.Attribute)) and receiver_name(node).lower().endswith("device_type")


# Checks that are False whenever PyTorch runs eagerly (not TorchScript, tracing or export):
# code under them never runs in an eager training loop, and code under their negation
# always does.
EAGER_FALSE_CALLS = frozenset(
    """torch.jit.is_scripting torch.jit.is_tracing torch._C._get_tracing_state
    torch._jit_internal.is_scripting torchvision._is_tracing torch.onnx.is_in_onnx_export
    torch.onnx.is_onnx_export torch.compiler.is_compiling torch.compiler.is_dynamo_compiling
    torch.compiler.is_exporting torch._dynamo.is_compiling torch.fx._symbolic_trace.is_fx_tracing""".split()
)
# The same checks re-exported by libraries under these names (transformers'
# `is_torchdynamo_compiling`, helpers called `_is_tracing`), matched when unresolved.
EAGER_FALSE_NAMES = frozenset(
    {"is_torchdynamo_compiling", "is_torchdynamo_exporting", "is_tracing", "_is_tracing",
     "is_scripting", "is_compiling", "is_dynamo_compiling", "is_in_onnx_export", "is_fx_tracing"}
)


def eager_truth(test: ast.expr, qualname) -> bool | None:
    """The value of an `if` test in eager mode when it is known (`torch.jit.is_scripting()`
    is False); `qualname(expr)` resolves a called name. None when it depends on data."""
    if isinstance(test, ast.Constant):  # `if 0:` / `if False:` (disabled debug code)
        return bool(test.value)
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return False
    if isinstance(test, ast.Call) and not test.args and not test.keywords:
        name = qualname(test.func)
        if name in EAGER_FALSE_CALLS:
            return False
        last = (name or receiver_name(test.func)).rsplit(".", 1)[-1]
        return False if last in EAGER_FALSE_NAMES else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = eager_truth(test.operand, qualname)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [eager_truth(v, qualname) for v in test.values]
        if isinstance(test.op, ast.Or):
            if any(v is True for v in values):
                return True
            return False if all(v is False for v in values) else None
        if any(v is False for v in values):
            return False
        return True if all(v is True for v in values) else None
    return None


def _cache_like(node: ast.expr) -> bool:
    name = receiver_name(node).lower()
    return "cache" in name or "memo" in name


def is_cache_hit_return(stmts: list[ast.stmt], index: int) -> bool:
    """`if key in self._cache: return ...` or `v = self._cache.get(key)` then
    `if v is not None: return v`: the statements after it run on a cache miss, once per key."""
    stmt = stmts[index]
    if not isinstance(stmt, ast.If) or stmt.orelse or terminates(stmt.body) is not ast.Return:
        return False
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, ast.In):
        return _cache_like(right)
    if not (isinstance(op, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None
            and isinstance(test.left, ast.Name)):
        return False
    name = test.left.id
    for previous in reversed(stmts[:index]):
        if isinstance(previous, ast.Assign) and len(previous.targets) == 1 \
                and isinstance(previous.targets[0], ast.Name) and previous.targets[0].id == name:
            value = previous.value
            return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "get" and _cache_like(value.func.value))
    return False


def is_cache_miss(test: ast.expr) -> bool:
    """`if key not in self._cache:`: the body fills a cache, once per key."""
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn)
            and _cache_like(test.comparators[0]))


def is_lazy_init(node: ast.If) -> bool:
    """`if len(state) == 0: state["step"] = ...`, `if self.buf is None: self.buf = ...`,
    `if "exp_avg" not in state: state["exp_avg"] = ...`, `if not self._checked: ...`: the
    body initialises the object the test looks at, so it runs once (per parameter, per
    key), not every step. So does a body that fills a cache on a miss."""
    if is_cache_miss(node.test) or _fills_up(node) or _stores_on_miss(node):
        return True
    if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And):
        # `if self.use_mlp and not self.mlp_init: self.create_mlp(feats)` (CUT's PatchSampleF):
        # a part that tests state kept on the object (a local's flag may be set every step)
        return any(_kept_on_self(part) and is_lazy_init(ast.If(test=part, body=node.body, orelse=[]))
                   for part in node.test.values)
    target = _lazy_init_object(node.test)
    if target is None:
        return False
    wanted = _initialised_name(target)
    owner = ast.unparse(target.value) if isinstance(target, ast.Attribute) else None
    for stmt in walk_nodes(ast.Module(body=node.body, type_ignores=[])):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            base = t.value if isinstance(t, ast.Subscript) else t
            if _initialised_name(t) == wanted or _initialised_name(base) == wanted:
                return True
        # `if self.step_index is None: self._init_step_index(t)`: an initialiser does it
        if owner is not None and isinstance(stmt, ast.Call) and isinstance(stmt.func, ast.Attribute) \
                and "init" in stmt.func.attr.lower() and ast.unparse(stmt.func.value) == owner:
            return True
        # `if task.loss.moco_encoder is None: self._build_moco_encoder(task)`: state kept on an
        # object, built by a builder (a local or a parameter is not kept: its `is None` branch
        # may be a default taken every step)
        if isinstance(target, ast.Attribute) and isinstance(stmt, ast.Call) \
                and _BUILDER.match(receiver_name(stmt.func).lower()):
            return True
    return False


_BUILDER = re.compile(r"_*(?:init|build|create|setup|make|construct)_")


def _stores_on_miss(node: ast.If) -> bool:
    """`tensor = _cache.get(key)`; `if tensor is None: tensor = ...; _cache[key] = tensor`: a
    miss builds the value and stores it in a cache, once per key."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
            and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        return False
    name = test.left.id
    return any(isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == name
               and any(isinstance(t, ast.Subscript) for t in stmt.targets)
               for stmt in walk_nodes(ast.Module(body=node.body, type_ignores=[])))


def _fills_up(node: ast.If) -> bool:
    """`if len(examples) < 5: examples.append(x.cpu())`: the body grows what the test
    bounds, so it runs a few times in all, not every step."""
    tests = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) \
        else [node.test]  # `if epsilon == 0 and len(examples) < 5:`
    bounded = []
    for test in tests:
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE)):
            call = test.left
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "len" \
                    and len(call.args) == 1:
                bounded.append(ast.unparse(call.args[0]))
    if not bounded:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("append", "extend", "add") and ast.unparse(n.func.value) in bounded
               for n in walk_nodes(ast.Module(body=node.body, type_ignores=[])))


def _initialised_name(node: ast.expr) -> str:
    """The text of what an assignment initialises, as a test reads it: the test loads what
    the body stores, and a property `self.step_index` reads the field `self._step_index`."""
    if isinstance(node, ast.Attribute):
        return f"{ast.unparse(node.value)}.{node.attr.lstrip('_')}"
    return ast.unparse(node)


def _lazy_init_object(test: ast.expr) -> ast.expr | None:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            and isinstance(test.operand, (ast.Attribute, ast.Subscript)):
        return test.operand  # `if not self._checked: self._checked = True`
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_len_call(test.operand) \
            and isinstance(test.operand.args[0], (ast.Attribute, ast.Subscript)):  # type: ignore[attr-defined]
        return test.operand.args[0]  # type: ignore[attr-defined]  # `if not len(self.q): self.q = ...`
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, ast.Eq):  # len(state) == 0
        call = left if isinstance(left, ast.Call) else right
        other = right if call is left else left
        if _is_len_call(call) and isinstance(other, ast.Constant) and other.value == 0:
            return call.args[0]  # type: ignore[attr-defined]
        return None
    if isinstance(op, ast.Is) and isinstance(right, ast.Constant) and right.value is None:
        return left if isinstance(left, (ast.Attribute, ast.Subscript)) else None  # self.cache is None
    if isinstance(op, ast.NotIn) and isinstance(left, ast.Constant) and isinstance(left.value, str):
        return right  # "exp_avg" not in state
    return None


def _kept_on_self(test: ast.expr) -> bool:
    """The object a lazy-initialisation test looks at is state of `self` (`self.mlp_init`)."""
    target = _lazy_init_object(test)
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return isinstance(target, ast.Name) and target.id == "self"


def _is_len_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
        and len(node.args) == 1


# ----------------------------------------------------------------- loops, tests, caches
# A function under one of these runs once per argument (or per instance), not every step.
CACHING_DECORATORS = frozenset({"lru_cache", "cache", "cached_property", "cached", "memoize"})

# Names of step counters: `step`, `global_step`, `batch_idx`, `it`, `epoch`, `self.iteration`.
STEP_COUNTER = re.compile(r"step|iter|epoch|(?:^|_)(?:batch_?(?:idx|id|i|num|index|nb)|it|itr|ni|bi|nb)$")
_TEST_NAME = re.compile(r"test(?:_|[A-Z0-9]|$)")
FEW_STEPS = 16  # `if batch_idx < 3:` draws a few pictures; it does not run every step


def is_test_function_name(name: str) -> bool:
    """`test_forward`, `testLoss`: in a test file, a pytest test (it checks, it does not train);
    `_test_sft_loss_masking`: the helper a test runs in each process."""
    return bool(_TEST_NAME.match(name.lstrip("_")))


def loop_counters(node: ast.For | ast.AsyncFor) -> frozenset[str]:
    """The names a loop binds to its iteration index: `i` in `for i, b in enumerate(x)` and
    in `for i in range(n)`."""
    target, iterable = node.target, node.iter
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name)):
        return frozenset()
    if iterable.func.id == "enumerate" and isinstance(target, ast.Tuple) and target.elts \
            and isinstance(target.elts[0], ast.Name):
        return frozenset({target.elts[0].id})
    if iterable.func.id == "range" and isinstance(target, ast.Name):
        return frozenset({target.id})
    return frozenset()


def few_iterations(iterable: ast.expr) -> bool:
    """`zip(range(3), loader)` / `itertools.islice(loader, 4)`: a few batches (pictures of
    the first validation batches), not a loop over the data; `for cfg in [(...), (...)]`: a
    sweep over a few written-out configurations."""
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return len(iterable.elts) <= FEW_STEPS
    if not isinstance(iterable, ast.Call):
        return False
    name = dotted(iterable.func)
    if name == "zip":
        return any(isinstance(a, ast.Call) and dotted(a.func) == "range" and _small_constant_args(a)
                   for a in iterable.args)
    if name in ("islice", "itertools.islice") and len(iterable.args) == 2:
        bound = iterable.args[1]
        return isinstance(bound, ast.Constant) and type(bound.value) is int and bound.value <= FEW_STEPS
    return False


_BATCH_EXTENT_METHODS = frozenset({"size", "numel"})
_CHUNKING_METHODS = frozenset({"split", "chunk", "tensor_split"})


_ACCUMULATION_COUNT = re.compile(r"accum|micro_?batch|grad_acc")


def is_micro_batch_loop(node: ast.AST) -> bool:
    """A loop over the slices of one batch (gradient accumulation): `for i in range(0,
    x.shape[0], mb): ... x[i : i + mb]`, `for part in batch.split(mb):`, `for _ in
    range(args.gradient_accumulation_steps):`. One call of the function that runs it is one
    step; the loop is not a loop over the data."""
    if not isinstance(node, (ast.For, ast.AsyncFor)):
        return False
    iterable = node.iter
    if not isinstance(iterable, ast.Call):
        return False
    if isinstance(iterable.func, ast.Attribute) and iterable.func.attr in _CHUNKING_METHODS:
        return True  # `batch.split(mb)`, `torch.chunk(batch, n)`
    if dotted(iterable.func) == "range" and len(iterable.args) == 1 and not iterable.keywords:
        count = dotted(iterable.args[0]) or ""
        return bool(_ACCUMULATION_COUNT.search(count.rsplit(".", 1)[-1].lower()))
    if dotted(iterable.func) != "range" or len(iterable.args) != 3 or not isinstance(node.target, ast.Name):
        return False
    if not _batch_extent(iterable.args[1]):
        return False
    index = node.target.id
    return any(isinstance(sub, ast.Slice) and isinstance(sub.lower, ast.Name) and sub.lower.id == index
               for stmt in node.body for sub in walk_nodes(stmt))


def _batch_extent(node: ast.expr) -> bool:
    """`x.shape[0]`, `x.size(0)`, `len(x)`, `x.numel()`."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
        return node.value.attr == "shape"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr in _BATCH_EXTENT_METHODS
        return isinstance(func, ast.Name) and func.id == "len"
    return False


def runs_once(body: list[ast.stmt]) -> bool:
    """A loop body that always ends in `return`, `break` or `raise` and never `continue`s:
    the loop runs one iteration (`for images, _ in loader: ...; return` times one batch)."""
    if terminates(body) is None:
        return False
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Continue):
            return False
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef, ast.Lambda)):
            stack.extend(child_nodes(node))
    return True


def few_while_iterations(loop: ast.While, preceding: list[ast.stmt]) -> bool:
    """`retries = 2` then `while retries: ...; retries -= 1`: a retry loop runs a few times.
    `preceding`: the statements before the loop in its block."""
    test = loop.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Gt, ast.NotEq)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0:
        test = test.left
    if not isinstance(test, ast.Name):
        return False
    start = next((stmt.value for stmt in reversed(preceding) if isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == test.id for t in stmt.targets)), None)
    if not (isinstance(start, ast.Constant) and type(start.value) is int and 0 < start.value <= FEW_STEPS):
        return False
    return any(isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == test.id
               and isinstance(n.op, ast.Sub) for n in walk_nodes(loop))


def _small_constant_args(call: ast.Call) -> bool:
    return bool(call.args) and all(
        isinstance(a, ast.Constant) and type(a.value) is int and a.value <= FEW_STEPS for a in call.args)


# Checks that a value is broken: `torch.isnan(loss).any()`, `not math.isfinite(loss)`.
_INVALID_VALUE_CHECKS = frozenset({"isnan", "isinf", "isneginf", "isposinf"})
_VALID_VALUE_CHECKS = frozenset({"isfinite", "isreal"})
# Calls that report a failure (a warning, a log line, a dump, an exit) rather than compute.
_FAILURE_REPORTS = re.compile(r"^(?:warn|warning|error|exception|critical|print|log|save|dump|exit|abort"
                              r"|skip|dump_\w+|save_\w+|log_\w+)$")


def is_failure_guard(node: ast.If, is_tensor: Callable[[ast.expr], bool] = lambda _: False) -> bool:
    """`if not torch.isfinite(loss).all():`, `if torch.isnan(loss).any():`, `if not
    math.isfinite(loss):` (NaN and Inf checks), and `if not valid.all():` whose body raises,
    skips the step or reports: a branch for broken data, which a healthy run never takes.
    So is a tensor compared with a number whose body only warns (`if offset_absmean > 50:
    logger.warning(...)`, BasicSR's deformable convolution). Its body is not per-step code
    (the test itself still runs every step)."""
    test = node.test
    if _is_nan_check(test):
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_all_check(test.operand):
        return terminates(node.body) is not None or any(_reports_failure(s) for s in node.body)
    bounded = _bounded_side(test)
    if bounded is None:
        return False
    if _call_name(bounded) in ("min", "max", "amin", "amax"):  # `if torch.min(y) < -1.: print(...)` (hifi-gan)
        return terminates(node.body) is not None or all(_reports_failure(s) for s in node.body)
    return is_tensor(bounded) and all(_warns(s) for s in node.body) \
        and any(not isinstance(s, ast.Assign) for s in node.body)


def _bounded_side(node: ast.expr) -> ast.expr | None:
    """`x > 50`, `-1. <= x`: the side compared with a constant."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE))):
        return None
    left, right = node.left, node.comparators[0]
    if _is_constant(right) and not _is_constant(left):
        return left
    if _is_constant(left) and not _is_constant(right):
        return right
    return None


def _is_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant))


def _warns(stmt: ast.stmt) -> bool:
    """A warning (`logger.warning(...)`, `warnings.warn(...)`), or the logger it is given by."""
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
        return "logger" in _call_name(stmt.value).lower()  # `logger = get_root_logger()`
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
        and _call_name(stmt.value) in ("warn", "warning", "warnings")


def _call_name(node: ast.expr) -> str:
    return receiver_name(node.func) if isinstance(node, ast.Call) else ""


def _is_all_check(node: ast.expr) -> bool:
    """`valid.all()`, `torch.all(valid)`, `torch.isfinite(x).all()`."""
    return _call_name(node) == "all"


def _is_nan_check(node: ast.expr) -> bool:
    if isinstance(node, ast.BoolOp):
        return all(_is_nan_check(v) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # `x.isnan().any() | x.isinf().any()`
        return _is_nan_check(node.left) and _is_nan_check(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = node.operand
        name = _call_name(inner)
        if name in _VALID_VALUE_CHECKS:  # `not math.isfinite(loss)`
            return True
        return name == "all" and _mentions(inner, _VALID_VALUE_CHECKS)  # `not x.isfinite().all()`
    name = _call_name(node)
    if name in _INVALID_VALUE_CHECKS:  # `math.isnan(loss)`
        return True
    return name == "any" and _mentions(node, _INVALID_VALUE_CHECKS | {"isfinite"})


def _mentions(node: ast.AST, names: frozenset[str]) -> bool:
    return any(_call_name(n) in names for n in walk_nodes(node) if isinstance(n, ast.Call))


def _reports_failure(stmt: ast.stmt) -> bool:
    """A call that warns or logs, or `if training: raise FloatingPointError(...)`: raising
    on some paths says the branch handles broken data."""
    if isinstance(stmt, ast.If) and any(isinstance(s, ast.Raise) for s in stmt.body):
        return True
    return any(_FAILURE_REPORTS.match(_call_name(n) or "-") is not None
               for n in walk_nodes(stmt) if isinstance(n, ast.Call))
