"""Per-file analysis: tensor-ness by abstract interpretation, and the hot path.

Two passes over the module's `ast`:

1. **Summaries** (lazy, callee first): each function is interpreted once to learn what it
   returns, and each class what its `self.<attr>` hold.
2. **Report** (caller first): functions are interpreted again with their parameters bound
   to what the callers passed, loops are pre-walked once so loop-carried values and "does
   this loop run the model / step the optimizer?" are known before their body is visited,
   and each node is handed to the rules that asked for its type, together with whether it
   runs every step.

Rules never walk the tree themselves; they receive nodes and ask `RuleContext` questions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not
from typing import TYPE_CHECKING, Callable, Iterable

from .calls import BUILTIN_NAMES, external_call_value, may_be_project_function
from .hints import hint_for_name
from .hotness import (
    COLD_METHODS,
    HOT_METHODS,
    eager_truth,
    is_cache_hit_return,
    is_lazy_init,
    is_loss_function_name,
    is_optimizer_step_receiver,
    is_throttled_test,
    terminates,
)
from .torch_api import (
    MODULE_STATE_CONSTRUCTORS,
    TENSOR_METADATA_ATTRS,
    classify_device,
    dtype_class_of,
    module_method_value,
    ndarray_method_value,
    tensor_attribute_value,
    device_of_expr,
    tensor_method_device,
    tensor_method_value,
    torch_call_device,
)
from .values import (
    module_output,
    BATCH,
    BOOL_TENSOR,
    DEVICE,
    LOADER,
    MODULE,
    NDARRAY,
    NONE,
    OPTIMIZER,
    PYTHON,
    TENSOR,
    TENSORS,
    UNKNOWN,
    UNKNOWN_MAYBE_PYTHON,
    Kind,
    Value,
    element_of,
    item_of,
    join,
    ref,
    seq_of,
    tuple_of,
)

if TYPE_CHECKING:
    from .context import RuleContext

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
Env = dict[str, Value]

# Methods that exist on tensors but not on numpy arrays or Python values: a receiver that
# calls one of them is a tensor.
TENSOR_ONLY_METHODS = frozenset(
    """cuda unsqueeze unsqueeze_ masked_fill masked_fill_ contiguous detach detach_ softmax
    log_softmax sigmoid relu permute expand expand_as new_zeros new_ones new_full new_empty
    new_tensor bmm matmul index_select masked_select nonzero_static type_as view_as
    reshape_as repeat_interleave float long bool half bfloat16 int double argmax argmin
    isnan isinf isfinite logical_not logical_and logical_or scatter scatter_ scatter_add
    scatter_add_ gather index_add_ index_put_ narrow unbind chunk requires_grad_ backward
    numel dim element_size is_contiguous item""".split()
)


@dataclass(eq=False)
class ClassInfo:
    name: str
    node: ast.ClassDef
    base_names: list[str]
    local_bases: list[ClassInfo] = field(default_factory=list)
    attrs: dict[str, Value] = field(default_factory=dict)
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    top_level: bool = False  # defined at module level: other files can import it
    is_module: bool = False
    is_loss: bool = False
    is_optimizer: bool = False
    is_scheduler: bool = False  # LR and diffusion schedulers: `step()` runs every step
    is_metric: bool = False  # torchmetrics / ignite metrics: `update()` runs every batch
    # A Dataset or a data transform: it runs on the CPU, in DataLoader workers, not in the step
    is_data_pipeline: bool = False
    is_autograd_function: bool = False

    def lineage(self) -> Iterable[ClassInfo]:
        """This class and its bases defined in the same file (each once)."""
        seen: set[int] = set()
        stack: list[ClassInfo] = [self]
        while stack:
            cls = stack.pop()
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            yield cls
            stack.extend(cls.local_bases)

    def lookup_attr(self, name: str) -> Value | None:
        return next((c.attrs[name] for c in self.lineage() if name in c.attrs), None)

    def lookup_method(self, name: str) -> FunctionInfo | None:
        return next((c.methods[name] for c in self.lineage() if name in c.methods), None)

    def instance(self) -> Value:
        kind = Kind.MODULE if self.is_module else Kind.OBJECT
        return Value(kind, ref=self.name, loss=self.is_loss)


@dataclass(eq=False)
class FunctionInfo:
    name: str
    node: FunctionNode | ast.Module
    cls: ClassInfo | None = None
    parent: FunctionInfo | None = None
    decorators: frozenset[str] = frozenset()
    returns: Value = NONE
    yields: Value | None = None
    arg_values: dict[str, Value] = field(default_factory=dict)  # what callers pass (report pass)
    # What callers pass, as seen by the summary pass: a fallback for callers that the report
    # pass does not walk (cold code without loops, such as `main()`).
    summary_arg_values: dict[str, Value] = field(default_factory=dict)
    callees: list[FunctionInfo] = field(default_factory=list)
    hot: bool = False
    hot_reason: str = ""
    has_loop: bool = False
    local_calls: int = 0  # calls in this file (summary pass)
    foreign_callers: bool = False  # other files call it every step (the project pass)
    opaque_calls: bool = False  # one of them passes `*args` / `**kwargs`
    # Outside its own loops it runs the model, the backward pass or an optimizer step (or
    # calls a function that does): a loop calling it is a training / inference loop.
    steps: bool = False
    # It contains a loop over data or a training loop of its own: calling it runs many
    # steps (an epoch, an evaluation), it is not one step. (A loss looping over scales and
    # calling loss modules does not count: that is not a loop over steps.)
    loops_steps: bool = False
    summary_state: int = 0  # 0 = not started, 1 = in progress, 2 = done
    report_walks: int = 0
    walked_hot: bool = False
    env: Env | None = None  # final environment of the report pass (closures read it)
    summary_env: Env | None = None

    @property
    def is_method(self) -> bool:
        return self.cls is not None and "staticmethod" not in self.decorators

    @property
    def result(self) -> Value:
        if self.yields is not None:
            return seq_of(self.yields)
        return self.returns


@dataclass(eq=False)
class LoopInfo:
    node: ast.AST
    data: bool
    direct_markers: bool = False
    train_markers: bool = False  # backward(), optimizer.step(), next(batches) in its own body
    nested_markers: bool = False
    root_hot: bool = False  # this loop is what makes its region hot
    nested_data: bool = False  # a loop inside iterates a data loader: this one is an epoch loop
    counters: frozenset[str] = frozenset()  # `i` in `for i, b in enumerate(...)`, `for i in range(n)`
    targets: frozenset[str] = frozenset()  # every name the loop binds


SUMMARY = 1
REPORT = 2

_CONVENTIONAL_ALIASES = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "np": "numpy",
    "numpy": "numpy",
    "pd": "pandas",
}


class FileAnalysis:
    """Facts about one parsed file; drives the two passes and dispatches to rules."""

    def __init__(
        self,
        tree: ast.Module,
        dispatch: dict[type, list[Callable[[ast.AST, RuleContext], None]]] | None = None,
        hot_only: dict[Callable, bool] | None = None,
        hot_functions: frozenset[str] = frozenset(),
        test_file: bool = False,
        host_only: bool = False,
        transforms_file: bool = False,
    ) -> None:
        self.tree = tree
        self.test_file = test_file  # pytest's file: its `test_*` functions are tests
        # The file never names an accelerator or a device: what it builds stays on the CPU.
        self.host_only = host_only
        # `transforms/` or `transforms.py`: its classes are data transforms (run in the
        # DataLoader's workers), even when they subclass nn.Module
        self.transforms_file = transforms_file
        # module-level functions other files call every step (the project pass)
        # "name" or "Class.method" -> the argument kinds other files pass ("f(t,-)": see
        # `call_signature`)
        self.hot_functions: dict[str, list[str]] = {}
        for seed in hot_functions:
            name, _, signature = seed.partition("(")
            self.hot_functions.setdefault(name, []).append(signature.rstrip(")"))
        # qualified names called from hot code that may be functions of other project files
        self.external_hot_calls: set[str] = set()
        self.dispatch = dispatch or {}
        self.hot_only = hot_only or {}
        self.classes: dict[str, ClassInfo] = {}
        self.functions: list[FunctionInfo] = []
        self.local_functions: dict[tuple[int, str], FunctionInfo] = {}
        self.module = FunctionInfo("<module>", tree)
        self.module_env: Env = {}
        self.context: RuleContext | None = None
        self.imports_torch = False
        self.cold_rules_enabled = any(not v for v in self.hot_only.values())
        self._subclasses: dict[int, list[ClassInfo]] | None = None
        self._collect(tree.body, parent=None, cls=None)
        self._link_classes()

    # ----------------------------------------------------------------- declarations
    def _collect(self, body: list[ast.stmt], parent: FunctionInfo | None, cls: ClassInfo | None) -> None:
        """Record every def and class, and whether each function contains a loop."""
        stack: list[tuple[ast.AST, FunctionInfo | None, ClassInfo | None]] = [
            (stmt, parent, cls) for stmt in reversed(body)
        ]
        expressions: list[tuple[FunctionInfo, ast.AST]] = []
        while stack:
            node, owner, owner_cls = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = frozenset(_decorator_name(d) for d in node.decorator_list)
                info = FunctionInfo(node.name, node, cls=owner_cls, parent=owner, decorators=decorators)
                self.functions.append(info)
                if owner_cls is not None:
                    owner_cls.methods.setdefault(node.name, info)
                else:
                    self.local_functions[(id(owner) if owner else 0, node.name)] = info
                node._perflint_info = info  # type: ignore[attr-defined]
                stack.extend((child, info, None) for child in reversed(node.body))
                continue
            if isinstance(node, ast.ClassDef):
                bases = [_dotted(b) for b in node.bases]
                info_c = ClassInfo(node.name, node, [b for b in bases if b],
                                   top_level=owner is None and owner_cls is None)
                self.classes.setdefault(node.name, info_c)
                node._perflint_info = info_c  # type: ignore[attr-defined]
                stack.extend((child, owner, info_c) for child in reversed(node.body))
                continue
            target = owner or self.module
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                target.has_loop = True
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                names = [module or ""] + [a.name for a in node.names]
                if any(n == "torch" or n.startswith("torch.") for n in names):
                    self.imports_torch = True
            # Statements are walked here, in the same order as always (it decides which of
            # two same-named defs wins); expressions hold no statements, only comprehensions,
            # so they are scanned afterwards and only for functions not yet known to loop.
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                    stack.append((child, owner, owner_cls))
                elif isinstance(child, _SCANNED) and not target.has_loop:
                    expressions.append((target, child))
        for target, expr in expressions:
            if not target.has_loop and _contains_comprehension(expr):
                target.has_loop = True

    def _link_classes(self) -> None:
        for cls in self.classes.values():
            for base in cls.base_names:
                local = self.classes.get(base.rsplit(".", 1)[-1]) if "." not in base else None
                if local is not None and local is not cls:
                    cls.local_bases.append(local)
        for cls in self.classes.values():
            cls.is_module = self._class_is(cls, _is_module_base)
            cls.is_loss = cls.name.endswith("Loss") or self._class_is(cls, lambda b: b.endswith("Loss"))
            cls.is_optimizer = self._class_is(cls, lambda b: b.endswith("Optimizer"))
            cls.is_scheduler = cls.name.endswith("Scheduler") or self._class_is(cls, lambda b: b.endswith("Scheduler"))
            cls.is_metric = cls.name.endswith("Metric") or self._class_is(cls, lambda b: b.endswith("Metric"))
            cls.is_data_pipeline = self.transforms_file or self._class_is(cls, _is_data_pipeline_base)
            cls.is_autograd_function = self._class_is(
                cls, lambda b: b in ("Function", "torch.autograd.Function", "autograd.Function")
            )

    def is_test(self, func: FunctionInfo) -> bool:
        """A pytest test function (`test_*` in a test file): it checks, it does not train."""
        return self.test_file and bool(_TEST_NAME.match(func.name))

    def overrides(self, cls: ClassInfo, name: str) -> list[FunctionInfo]:
        """Methods called `name` that classes derived from `cls` in this file define."""
        if self._subclasses is None:
            self._subclasses = {}
            for sub in self.classes.values():
                for base in sub.lineage():
                    if base is not sub:
                        self._subclasses.setdefault(id(base), []).append(sub)
        return [sub.methods[name] for sub in self._subclasses.get(id(cls), []) if name in sub.methods]

    def _class_is(self, cls: ClassInfo, predicate: Callable[[str], bool]) -> bool:
        seen: set[int] = set()
        stack = [cls]
        while stack:
            c = stack.pop()
            if id(c) in seen:
                continue
            seen.add(id(c))
            if any(predicate(b) for b in c.base_names):
                return True
            stack.extend(c.local_bases)
        return False

    # ----------------------------------------------------------------- passes
    def run(self) -> None:
        self._summaries()
        self._seed_hot_functions()
        self._report()

    def _summaries(self) -> None:
        # Functions called at module level (`main()`, `loader = make_loader()`) are summarized
        # during the module walk, before its environment exists: let them see the module's
        # imports, functions and classes.
        self.module_env = self._module_declarations()
        _Walker(self, self.module, SUMMARY).run()
        self.module_env = self.module.summary_env or {}
        for cls in self.classes.values():
            for name in ("__init__", "setup", "build", "_build", "reset_parameters"):
                method = cls.methods.get(name)
                if method is not None:
                    self.ensure_summary(method)
        for func in self.functions:
            self.ensure_summary(func)

    def _module_declarations(self) -> Env:
        """Names bound by module-level imports, defs and classes (also under if / try)."""
        env: Env = {}
        stack: list[ast.stmt] = list(reversed(self.tree.body))
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        env[alias.asname] = ref(alias.name)
                    else:
                        top = alias.name.split(".", 1)[0]
                        env[top] = ref(top)
            elif isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                for alias in node.names:
                    if alias.name != "*":
                        qual = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
                        env[alias.asname or alias.name] = ref(qual)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if getattr(node, "_perflint_info", None) is not None:
                    env[node.name] = Value(Kind.FUNC, ref=node.name)
            elif isinstance(node, ast.ClassDef):
                if getattr(node, "_perflint_info", None) is not None:
                    env[node.name] = Value(Kind.CLASS, ref=node.name)
            elif isinstance(node, (ast.If, ast.Try)) or type(node).__name__ == "TryStar":
                children = list(node.body) + list(node.orelse)
                for handler in getattr(node, "handlers", []):
                    children.extend(handler.body)
                children.extend(getattr(node, "finalbody", []))
                stack.extend(reversed(children))
        return env

    def ensure_summary(self, func: FunctionInfo) -> None:
        if func.summary_state:
            return
        func.summary_state = 1
        try:
            _Walker(self, func, SUMMARY).run()
        finally:
            func.summary_state = 2

    def _seed_hot_functions(self) -> None:
        for func in self.functions:
            reason = self._seed_reason(func)
            if reason:
                func.hot, func.hot_reason = True, reason
            key = func.name if func.cls is None else f"{func.cls.name}.{func.name}"
            if func.parent is None and key in self.hot_functions:
                func.foreign_callers = True
                self._bind_foreign_arguments(func, self.hot_functions[key])

    def _bind_foreign_arguments(self, func: FunctionInfo, signatures: list[str]) -> None:
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

    def _seed_reason(self, func: FunctionInfo) -> str:
        name, cls = func.name, func.cls
        if name in COLD_METHODS or self.is_test(func):
            return ""  # `__init__`; `test_ctc_loss` tests a loss, it is not one
        if cls is None and func.parent is None and name in self.hot_functions:
            return f"`{name}` is called every step from another module"
        if cls is not None:
            if cls.top_level and f"{cls.name}.{name}" in self.hot_functions:
                return f"`{cls.name}.{name}` is called every step from another module"
            if cls.is_autograd_function and name in ("forward", "backward"):
                return f"autograd Function `{cls.name}.{name}`"
            if cls.is_data_pipeline:
                return ""  # `BaseTransform.forward(data)` runs in the data pipeline
            if (name in HOT_METHODS or name.startswith("forward_")) and (cls.is_module or self.imports_torch):
                return f"`{cls.name}.{name}` runs every step"
            if name == "__call__" and cls.is_loss:
                return f"loss `{cls.name}.__call__`"
            if name == "step" and cls.is_optimizer:
                return f"optimizer `{cls.name}.step`"
            if name == "step" and cls.is_scheduler:
                return f"scheduler `{cls.name}.step` runs every (denoising) step"
            if name in ("update", "_update") and cls.is_metric:
                return f"metric `{cls.name}.{name}` runs every batch"
            if is_loss_function_name(name) and (cls.is_module or self.imports_torch) and not func.loops_steps:
                return f"loss method `{cls.name}.{name}`"
            return ""
        # `train_cosine_loss(model, loader)` loops over the data: a training routine
        if func.parent is None and is_loss_function_name(name) and self.imports_torch and not func.loops_steps:
            return f"loss function `{name}`"
        return ""

    def _report(self) -> None:
        order = self._caller_first_order()
        self.module.hot = False
        _Walker(self, self.module, REPORT).run()
        self.module_env = self.module.env or self.module_env
        for func in order:
            if self._needs_report_walk(func):
                self._report_walk(func)
        # A callee that became hot after it was walked (a call cycle) is walked once more.
        for func in order:
            if func.hot and not func.walked_hot and func.report_walks < 2:
                self._report_walk(func)

    def _report_walk(self, func: FunctionInfo) -> None:
        func.report_walks += 1
        func.walked_hot = func.hot
        _Walker(self, func, REPORT).run()

    def _needs_report_walk(self, func: FunctionInfo) -> bool:
        return func.hot or func.has_loop or self.cold_rules_enabled

    def _caller_first_order(self) -> list[FunctionInfo]:
        """Functions ordered so that callers come before their callees (cycles broken)."""
        order: list[FunctionInfo] = []
        state: dict[int, int] = {}
        roots = [self.module] + self.functions
        for root in roots:
            if id(root) in state:
                continue
            stack: list[tuple[FunctionInfo, int]] = [(root, 0)]
            state[id(root)] = 1
            while stack:
                func, i = stack.pop()
                if i < len(func.callees):
                    stack.append((func, i + 1))
                    callee = func.callees[i]
                    if id(callee) not in state:
                        state[id(callee)] = 1
                        stack.append((callee, 0))
                else:
                    order.append(func)
        order.reverse()
        return [f for f in order if f is not self.module]

    # ----------------------------------------------------------------- call graph
    def note_call(self, caller: FunctionInfo, callee: FunctionInfo, binding: dict[str, Value],
                  mode: int, hot: bool, reason: str) -> None:
        if mode == SUMMARY:
            if callee not in caller.callees:
                caller.callees.append(callee)
            target = callee.summary_arg_values
        else:
            target = callee.arg_values
        for name, value in binding.items():
            old = target.get(name)
            target[name] = value if old is None else join(old, value)
        if mode == SUMMARY:
            return
        if hot and not callee.hot and callee.name not in COLD_METHODS and not self.is_test(callee) \
                and not callee.decorators & _CACHING_DECORATORS:
            callee.hot, callee.hot_reason = True, reason


# A function under one of these runs once per argument (or per instance), not every step.
_CACHING_DECORATORS = frozenset({"lru_cache", "cache", "cached_property", "cached", "memoize"})

# Methods of a model (defined elsewhere) that run it once: a loop calling them is a step
# loop. (`generate` / `sample` run a whole decoding loop of their own: a loop over prompts
# calling them is not a step loop.)
_MODEL_COMPUTE_METHODS = frozenset(
    """encode decode predict embed infer inference forward_features forward_head
    extract_features denoise""".split()
)
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
_PROJECT_CLASS = "@"
_DEVICE_STRINGS = frozenset({"cpu", "cuda", "mps", "xpu", "xla", "hpu", "npu"})
_SELF_ATTR = "self."
_SCANNED = (ast.expr, ast.comprehension)
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


def _contains_comprehension(root: ast.AST) -> bool:
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
                    if isinstance(item, _SCANNED):
                        push(item)
            elif isinstance(value, _SCANNED):
                push(value)
    return False


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return _dotted(node).rsplit(".", 1)[-1]


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Subscript):  # Generic[T], nn.Module[...]
        return _dotted(node.value)
    return ""


def _is_data_pipeline_base(base: str) -> bool:
    last = base.rsplit(".", 1)[-1]
    return last.endswith(("Dataset", "Transform")) or last in ("IterableDataset", "Sampler")


def _is_rnn_base(base: str) -> bool:
    return base.rsplit(".", 1)[-1] in ("RNNBase", "RNN", "LSTM", "GRU")


def _is_module_base(base: str) -> bool:
    last = base.rsplit(".", 1)[-1]
    return (
        base in ("nn.Module", "torch.nn.Module", "Module", "LightningModule", "pl.LightningModule")
        or last.endswith(("Module", "Model", "Layer", "Block", "Loss", "Net", "Network", "Encoder",
                          "Decoder", "Head", "Backbone"))
        or base.startswith(("nn.", "torch.nn."))
    )


def _join_env(a: Env, b: Env) -> Env:
    if a is b:
        return a
    out = dict(a)
    # Only keys whose values differ need a join (join(x, x) is x). Branch environments are
    # copies of one environment, so most values are the same objects: finding the few that
    # differ in C (compress/map/is_not) keeps a function with thousands of variables and
    # branches from taking quadratic Python time.
    keys = list(b)
    for key in compress(keys, map(is_not, map(a.get, keys), map(b.__getitem__, keys))):
        value = b[key]
        old = out.get(key)
        out[key] = value if old is None else join(old, value)
    return out


_ANNOTATION_VALUES: dict[str, Value] = {
    "Tensor": TENSOR,
    "torch.Tensor": TENSOR,
    "FloatTensor": TENSOR,
    "torch.FloatTensor": TENSOR,
    "LongTensor": Value(Kind.TENSOR, dtype="int"),
    "torch.LongTensor": Value(Kind.TENSOR, dtype="int"),
    "BoolTensor": BOOL_TENSOR,
    "torch.BoolTensor": BOOL_TENSOR,
    "nn.Module": MODULE,
    "torch.nn.Module": MODULE,
    "Module": MODULE,
    "DataLoader": LOADER,
    "torch.utils.data.DataLoader": LOADER,
    "torch.device": DEVICE,
    "device": DEVICE,
    "Optimizer": OPTIMIZER,
    "torch.optim.Optimizer": OPTIMIZER,
    "np.ndarray": NDARRAY,
    "numpy.ndarray": NDARRAY,
    "ndarray": NDARRAY,
}
_PY_ANNOTATIONS = frozenset({"bool", "int", "float", "str", "bytes", "dict", "Dict", "set"})
_SEQ_ANNOTATIONS = frozenset({"List", "list", "Tuple", "tuple", "Sequence", "Iterable", "Iterator"})
_OPTIONAL_ANNOTATIONS = frozenset({"Optional", "Union"})


def annotation_value(node: ast.expr | None) -> Value | None:
    """What a parameter annotated `node` holds, if the annotation says."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # Tensor | None
        left, right = annotation_value(node.left), annotation_value(node.right)
        candidates = [v for v in (left, right) if v is not None and v.kind is not Kind.NONE]
        return candidates[0] if len(candidates) == 1 else None
    if isinstance(node, ast.Constant) and node.value is None:
        return NONE
    if isinstance(node, ast.Subscript):
        outer = _dotted(node.value).rsplit(".", 1)[-1]
        inner = node.slice
        inner_nodes = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer in _OPTIONAL_ANNOTATIONS:
            values = [annotation_value(n) for n in inner_nodes]
            real = [v for v in values if v is None or v.kind is not Kind.NONE]
            return real[0] if len(real) == 1 else None
        if outer in _SEQ_ANNOTATIONS:
            elems = [annotation_value(n) for n in inner_nodes if not (isinstance(n, ast.Constant) and n.value is Ellipsis)]
            if elems and all(e is not None and e.kind is Kind.TENSOR for e in elems):
                return TENSORS
            if elems and all(e is not None and e.kind is Kind.PYTHON for e in elems):
                return seq_of(PYTHON)  # `list[float]`
            return Value(Kind.SEQ)
        if outer in ("Dict", "dict", "Mapping", "MutableMapping"):
            values = [annotation_value(n) for n in inner_nodes]
            if len(values) == 2 and values[1] is not None and values[1].kind is Kind.TENSOR:
                return _python_dict([values[1]])  # `batch[k]` is a tensor; `for k in batch`, a key
            return PYTHON
        return None
    name = _dotted(node)
    if not name:
        return None
    if name in _ANNOTATION_VALUES:
        return _ANNOTATION_VALUES[name]
    if name in _PY_ANNOTATIONS:
        return PYTHON
    return None


class _Walker:
    """Interprets one function body (or the module body) in one pass."""

    def __init__(self, file: FileAnalysis, func: FunctionInfo, mode: int) -> None:
        self.file = file
        self.func = func
        self.mode = mode
        self.env: Env = {}
        self.silent = 0
        self.hot = False
        self.loops: list[LoopInfo] = []
        self.memo: dict[ast.AST, Value] = {}
        self.stmt: ast.stmt | None = None
        self.cls_scope: ClassInfo | None = None
        self.self_name: str | None = None  # a method's `self` parameter
        self._outer = self._outer_envs()

    # ----------------------------------------------------------------- set-up
    def _outer_envs(self) -> list[Env]:
        envs: list[Env] = []
        parent = self.func.parent
        while parent is not None:
            env = parent.env if self.mode == REPORT and parent.env is not None else parent.summary_env
            if env:
                envs.append(env)
            parent = parent.parent
        if self.func.node is not self.file.tree:
            envs.append(self.file.module_env)
        return envs

    @property
    def reporting(self) -> bool:
        return self.mode == REPORT and not self.silent

    @property
    def _in_test(self) -> bool:
        """A test (`def test_...` in a test file, a `unittest.TestCase` method): its loops check results,
        they are not a training or inference loop. Nor are the loops of a dataset's or a
        data transform's methods (`Dataset.process()` preparing files once)."""
        func: FunctionInfo | None = self.func
        while func is not None:
            if self.file.is_test(func):
                return True
            if func.cls is not None and (func.cls.is_data_pipeline or any(
                    b.rsplit(".", 1)[-1] == "TestCase" for b in func.cls.base_names)):
                return True
            func = func.parent
        return False

    def run(self) -> None:
        func, node = self.func, self.func.node
        if isinstance(node, ast.Module):
            self.body(node.body)
        else:
            self._bind_parameters(node)
            self.hot = self.mode == REPORT and func.hot
            self.body(node.body)
        if self.mode == SUMMARY:
            self._commit_self_attrs()
            func.summary_env = self.env
        else:
            func.env = self.env

    def _bind_parameters(self, node: FunctionNode) -> None:
        args = node.args
        positional = list(args.posonlyargs) + list(args.args)
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        params = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        func = self.func
        for index, (arg, default) in enumerate(params):
            if index == 0 and func.cls is not None and arg in positional[:1]:
                if "staticmethod" not in func.decorators:
                    if "classmethod" in func.decorators:
                        self.env[arg.arg] = Value(Kind.CLASS, ref=func.cls.name)
                    elif func.cls.is_autograd_function:
                        self.env[arg.arg] = Value(Kind.OBJECT)
                    else:
                        self.env[arg.arg] = func.cls.instance()
                        self.self_name = arg.arg
                    continue
            self.env[arg.arg] = self._parameter_value(arg, default)
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                self.env[extra.arg] = Value(Kind.SEQ) if extra is args.vararg else PYTHON

    def _parameter_value(self, arg: ast.arg, default: ast.expr | None) -> Value:
        annotated = annotation_value(arg.annotation)
        passed = None
        if self.mode == REPORT:
            name = arg.arg
            passed = self.func.arg_values.get(name) or self.func.summary_arg_values.get(name)
            if passed is None and self._always_default(name, default):
                return NONE if default.value is None else PYTHON  # type: ignore[union-attr]
        if annotated is not None and annotated.kind is not Kind.NONE:
            # `def f(n: torch.LongTensor)` called only with ints: the callers are right.
            if annotated.kind is Kind.TENSOR and passed is not None and passed.kind is Kind.PYTHON:
                return passed
            if passed is not None and passed.kind is annotated.kind:
                return passed  # same kind, and what callers pass knows more (device, origin)
            return annotated
        if self.mode == REPORT:
            if passed is not None and passed.kind is not Kind.UNKNOWN:
                return passed
        if isinstance(default, ast.Constant) and default.value is not None:
            return PYTHON  # `local_loss=False` is a flag, whatever its name says
        hint = hint_for_name(arg.arg, parameter=True)
        if hint is not None:
            return hint
        if default is not None:
            if isinstance(default, ast.Constant):
                return NONE
            if isinstance(default, (ast.List, ast.Tuple, ast.Dict, ast.UnaryOp)):
                return PYTHON
        elif arg.annotation is None and self._is_forward_input():
            return TENSOR
        return UNKNOWN

    def _always_default(self, name: str, default: ast.expr | None) -> bool:
        """A private helper (`_get_values`) that every caller in this file calls without
        this argument: it holds its default (`value=None`, not the `Optional[Tensor]` its
        annotation allows)."""
        func = self.func
        return (isinstance(default, ast.Constant) and func.name.startswith("_") and not func.name.startswith("__")
                and func.local_calls > 0 and not func.opaque_calls and not func.foreign_callers
                and name not in func.summary_arg_values)

    def _is_forward_input(self) -> bool:
        func = self.func
        return func.name == "forward" and func.cls is not None and func.cls.is_module

    # ----------------------------------------------------------------- names
    def lookup(self, name: str) -> Value:
        value = self.env.get(name)
        if value is not None:
            return value
        for env in self._outer:
            value = env.get(name)
            if value is not None:
                return value
        if name in BUILTIN_NAMES:
            return ref("builtins." + name)
        # A free name: conventional module aliases (snippets, notebook cells), else its name.
        module = _CONVENTIONAL_ALIASES.get(name)
        if module is not None:
            return ref(module)
        return hint_for_name(name) or UNKNOWN

    def bind(self, name: str, value: Value) -> None:
        if value.kind is Kind.UNKNOWN:
            hint = hint_for_name(name)
            if hint is not None:
                value = hint
        self.env[name] = value
        if self.cls_scope is not None and self.mode == SUMMARY:
            self._set_attr(self.cls_scope, name, value)

    def _set_attr(self, cls: ClassInfo, name: str, value: Value) -> None:
        old = cls.attrs.get(name)
        cls.attrs[name] = value if old is None else join(old, value)

    # `self.<attr>` inside a method is tracked like a local variable (under the key
    # "self.<attr>", which no identifier can clash with): a later assignment replaces an
    # earlier one (`self.sigmas = torch.cat(...)` then `self.sigmas = self.sigmas.to("cpu")`),
    # and what the method leaves behind, on every path, is what the class's attribute holds.
    def _self_attr_key(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and self.self_name is not None and node.value.id == self.self_name:
            return _SELF_ATTR + node.attr
        return None

    def _commit_self_attrs(self) -> None:
        cls = self.func.cls
        if cls is None or self.self_name is None:
            return
        for key, value in self.env.items():
            if key.startswith(_SELF_ATTR):
                self._set_attr(cls, key[len(_SELF_ATTR):], value)

    def qualname(self, node: ast.expr) -> str | None:
        """The qualified name an expression refers to (`T.nonzero` -> "torch.nonzero")."""
        if isinstance(node, ast.Name):
            value = self.memo.get(node) or self.lookup(node.id)
            return value.ref if value.kind is Kind.REF else None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    # ----------------------------------------------------------------- statements
    def body(self, stmts: list[ast.stmt]) -> None:
        hot = self.hot
        for index, stmt in enumerate(stmts):
            handler = _STMT_HANDLERS.get(type(stmt))
            previous = self.stmt
            self.stmt = stmt
            if handler is None:
                self._stmt_generic(stmt)
            else:
                handler(self, stmt)
            self.stmt = previous
            if self.hot and is_cache_hit_return(stmts, index):
                self.hot = False  # the rest computes a cached value: once per key, not per step
            if self.hot and terminates([stmt]) is not None:
                self.hot = False  # after `raise` / `assert False` / `return`: never runs
        self.hot = hot

    def _dispatch(self, node: ast.AST) -> None:
        rules = self.file.dispatch.get(type(node))
        if rules and self.reporting:
            ctx = self.file.context
            assert ctx is not None
            ctx._walker = self
            hot = self.hot
            for rule in rules:
                if hot or not self.file.hot_only.get(rule, True):
                    ctx._enter(rule, node)
                    rule(node, ctx)

    def _stmt_generic(self, stmt: ast.stmt) -> None:
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.ev(child)
        self._dispatch(stmt)

    def st_Expr(self, node: ast.Expr) -> None:
        self.ev(node.value)
        self._dispatch(node)

    def st_Assign(self, node: ast.Assign) -> None:
        value = self.ev(node.value)
        for target in node.targets:
            self.assign(target, value)
        self._dispatch(node)

    def st_AnnAssign(self, node: ast.AnnAssign) -> None:
        value = self.ev(node.value) if node.value is not None else None
        annotated = annotation_value(node.annotation)
        if value is None or value.kind in (Kind.UNKNOWN, Kind.NONE):
            value = annotated or value or UNKNOWN
        if node.value is not None or annotated is not None:
            self.assign(node.target, value)
        self._dispatch(node)

    def st_AugAssign(self, node: ast.AugAssign) -> None:
        current = self._current_value(node.target)
        value = self.ev(node.value)
        result = self.binop(current, node.op, value, node.target, node.value)
        self.assign(node.target, result, augmented=True)
        self._dispatch(node)

    def _current_value(self, target: ast.expr) -> Value:
        if isinstance(target, ast.Name):
            value = self.lookup(target.id)
            if self.reporting:
                self.memo[target] = value
            return value
        return self.ev(target)

    def st_Return(self, node: ast.Return) -> None:
        value = self.ev(node.value) if node.value is not None else NONE
        if self.mode == SUMMARY:
            self.func.returns = join(self.func.returns, value)
            self._commit_self_attrs()  # this path's attributes: the merge drops its environment
        self._dispatch(node)

    def st_If(self, node: ast.If) -> None:
        self.ev(node.test)
        self._dispatch(node)
        hot = self.hot
        body_hot = hot and not is_throttled_test(node.test) and not self._once_test(node.test) \
            and not is_lazy_init(node)
        body_hot = body_hot and not self._leaves_hot_region(node.body)
        else_hot = hot and not self._leaves_hot_region(node.orelse)
        # `if torch.jit.is_scripting():` — only one branch runs in eager mode.
        eager = eager_truth(node.test, self.qualname)
        body_hot, else_hot = body_hot and eager is not False, else_hot and eager is not True
        before = self.env
        self.env = dict(before)
        self._narrow(node.test)
        self.hot = body_hot
        self.body(node.body)
        after_body = self.env
        self.env = dict(before)
        if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not):
            self._narrow(node.test.operand)  # `if not isinstance(t, Tensor): ... else: <t is a tensor>`
        self.hot = else_hot
        self.body(node.orelse)
        after_else = self.env
        self.hot = hot
        branches = [(node.body, after_body), (node.orelse, after_else)]
        if eager is not None:
            branches = [branches[0] if eager else branches[1]]
        self.env = self._merge_branches(branches, before)

    def _narrow(self, test: ast.expr) -> None:
        """In `if isinstance(x, np.generic):` x is a numpy value, whatever it was before; in
        `if not isinstance(t, torch.Tensor):` (or `not torch.is_tensor(t)`) t is not a tensor."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            for value in test.values:
                self._narrow(value)
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            checked = _tensor_check_subject(test.operand, self.qualname)
            if checked is not None:
                self.env[checked] = UNKNOWN_MAYBE_PYTHON
            return
        checked = _tensor_check_subject(test, self.qualname)
        if checked is not None and isinstance(test, ast.Call) and not (
                isinstance(test.func, ast.Name) and test.func.id == "isinstance"):
            self.env[checked] = TENSOR  # `if torch.is_tensor(t):`
            return
        on_cpu = _cpu_check_subject(test)
        if on_cpu is not None:  # `if x.device.type == "cpu":` x lives in host memory here
            current = self.lookup(on_cpu)
            if current.kind in (Kind.TENSOR, Kind.BATCH, Kind.UNKNOWN):
                base = current if current.kind is not Kind.UNKNOWN else TENSOR
                self.env[on_cpu] = base.with_device("cpu")
            return
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2 and isinstance(test.args[0], ast.Name)):
            return
        types = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        values = [_isinstance_value(self.qualname(t) or _dotted(t)) for t in types]
        if values and all(v is not None for v in values):
            narrowed = values[0]
            for value in values[1:]:
                narrowed = join(narrowed, value)  # type: ignore[arg-type]
            self.env[test.args[0].id] = narrowed  # type: ignore[assignment]

    def _merge_branches(self, branches: list[tuple[list[ast.stmt], Env]], before: Env) -> Env:
        live = [env for stmts, env in branches if terminates(stmts) is None]
        if not live:
            return before
        result = live[0]
        for env in live[1:]:
            result = _join_env(result, env)
        return result

    def _once_test(self, test: ast.expr) -> bool:
        """`if step == 0:` / `if batch_idx < 3:` on a step counter runs once (or a few
        times), not every step. `x.ndim == 4`, `B == 1` or the index of a loop over layers
        are not step counters: what they guard runs every step."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return False
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(left, ast.Constant):
            left, right = right, left
            op = {ast.Gt: ast.Lt(), ast.GtE: ast.LtE()}.get(type(op), op)
        if not (isinstance(right, ast.Constant) and type(right.value) is int):
            return False
        if not (isinstance(op, ast.Eq) or (isinstance(op, (ast.Lt, ast.LtE)) and right.value <= _FEW_STEPS)):
            return False
        if not isinstance(left, (ast.Name, ast.Attribute)):
            return False
        if self.memo.get(left, self._peek(left)).kind is not Kind.PYTHON:
            return False
        if isinstance(left, ast.Name):
            loop = next((lp for lp in reversed(self.loops) if left.id in lp.counters), None)
            if loop is not None:  # the index of the step loop, not of a loop inside the step
                return loop.root_hot or loop.data
            return bool(_STEP_COUNTER.search(left.id.lower()))
        return bool(_STEP_COUNTER.search(left.attr.lower()))

    def _peek(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        return UNKNOWN

    def _leaves_hot_region(self, body: list[ast.stmt]) -> bool:
        """A block that raises, or leaves the loop that makes this region hot, runs once."""
        jump = terminates(body)
        if jump is ast.Raise:
            return True
        if jump is ast.Break:
            return bool(self.loops) and self.loops[-1].root_hot
        if jump is ast.Return:
            return not self.func.hot and any(loop.root_hot for loop in self.loops)
        return False

    def st_For(self, node: ast.For | ast.AsyncFor) -> None:
        iterable = self.ev(node.iter)
        self._dispatch(node)
        elem = element_of(iterable)
        few = _few_iterations(node.iter)
        data = _is_data(iterable, elem) and not few
        targets = frozenset(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        self._loop(node, data, lambda: self.assign(node.target, elem), node.body, None,
                   counters=_loop_counters(node), few=few, targets=targets)
        self.body(node.orelse)

    def st_While(self, node: ast.While) -> None:
        def test() -> None:
            self.ev(node.test)
            self._dispatch(node)

        self._loop(node, False, test, node.body, node.test)
        self.body(node.orelse)

    def _loop(self, node: ast.AST, data: bool, head: Callable[[], None], body: list[ast.stmt],
              while_test: ast.expr | None, counters: frozenset[str] = frozenset(), few: bool = False,
              targets: frozenset[str] = frozenset()) -> None:
        info = LoopInfo(node, data, counters=counters, targets=targets)
        before = self.env
        hot_before = self.hot
        if self.reporting:
            # Pre-walk once, silently, to learn loop-carried values and step markers.
            self.env = dict(before)
            self.silent += 1
            self.loops.append(info)
            if while_test is not None:
                self.ev(while_test)
            else:
                head()
            self.body(body)
            self.loops.pop()
            self.silent -= 1
            before = _join_env(before, self.env)
        # The pre-walk filled the markers in. A loop around a loop over the data is an epoch
        # loop: the model calls in its own body (validation) run once per epoch.
        steps = info.data or (info.direct_markers and not info.nested_data and (
            # A loop that only runs a model (`vae.decode`) around a loop that runs one per
            # step (the denoising loop) is a loop over chunks, not over steps; one that also
            # steps the optimizer around a micro-batch loop is the training loop.
            info.train_markers or not info.nested_markers))
        loop_hot = steps and not few and not self._in_test
        info.root_hot = loop_hot and not hot_before
        self.hot = hot_before or loop_hot
        self.env = dict(before)
        self.loops.append(info)
        head()
        self.body(body)
        self.loops.pop()
        self.env = _join_env(before, self.env)
        self.hot = hot_before
        if (info.data or info.train_markers) and not few:
            self.func.loops_steps = True  # known now in both passes: the body has been walked
        if self.loops and (info.direct_markers or info.nested_markers):
            self.loops[-1].nested_markers = True
        if self.loops and (info.data or info.nested_data):
            self.loops[-1].nested_data = True

    def _mark_step(self, trains: bool = False) -> None:
        """The code being walked runs the model (or, `trains`, runs the backward pass, steps
        the optimizer or takes the next batch): a training or inference step."""
        if self.loops:
            self.loops[-1].direct_markers = True
            if trains:
                self.loops[-1].train_markers = True
        else:
            self.func.steps = True  # one call of this function is one step

    def st_Try(self, node: ast.Try) -> None:
        before = self.env
        self.env = dict(before)
        self.body(node.body)
        after_body = self.env
        hot = self.hot
        envs = [(node.body, after_body)]
        for handler in node.handlers:
            self.env = _join_env(before, after_body)
            self.hot = False  # exceptional paths do not run every step
            if handler.type is not None:
                self.ev(handler.type)
            if handler.name:
                self.env[handler.name] = PYTHON
            self.body(handler.body)
            envs.append((handler.body, self.env))
        self.hot = hot
        self.env = self._merge_branches(envs, before)
        self.body(node.orelse)
        self.body(node.finalbody)

    def st_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.ev(item.context_expr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, UNKNOWN)
        self._dispatch(node)
        self.body(node.body)

    def st_Match(self, node: ast.AST) -> None:
        self.ev(node.subject)  # type: ignore[attr-defined]
        before = self.env
        envs = []
        for case in node.cases:  # type: ignore[attr-defined]
            self.env = dict(before)
            for name in _pattern_names(case.pattern):
                self.env[name] = UNKNOWN
            if case.guard is not None:
                self.ev(case.guard)
            self.body(case.body)
            envs.append((case.body, self.env))
        self.env = self._merge_branches(envs, before) if envs else before

    def st_Raise(self, node: ast.Raise) -> None:
        hot = self.hot
        self.hot = False
        for child in (node.exc, node.cause):
            if child is not None:
                self.ev(child)
        self._dispatch(node)
        self.hot = hot

    def st_Assert(self, node: ast.Assert) -> None:
        self.ev(node.test)
        hot = self.hot
        self.hot = False  # the message is only built when the assertion fails
        if node.msg is not None:
            self.ev(node.msg)
        self.hot = hot
        self._dispatch(node)

    def st_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.env.pop(target.id, None)
            else:
                self.ev(target)
        self._dispatch(node)

    def st_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.env[alias.asname] = ref(alias.name)
            else:
                top = alias.name.split(".", 1)[0]
                self.env[top] = ref(top)
        self._dispatch(node)

    def st_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = ("." * node.level) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            qual = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
            self.env[alias.asname or alias.name] = ref(qual)
        self._dispatch(node)

    def st_FunctionDef(self, node: FunctionNode) -> None:
        hot = self.hot
        self.hot = False
        for default in list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]:
            self.ev(default)
        for decorator in node.decorator_list:
            self.ev(decorator)
        self.hot = hot
        info = getattr(node, "_perflint_info", None)
        value = Value(Kind.FUNC, ref=node.name) if info is not None else UNKNOWN
        if self.cls_scope is None:
            self.env[node.name] = value
        self._dispatch(node)

    def st_ClassDef(self, node: ast.ClassDef) -> None:
        info: ClassInfo | None = getattr(node, "_perflint_info", None)
        for base in node.bases:
            self.ev(base)
        outer_cls, outer_env, hot = self.cls_scope, self.env, self.hot
        self.cls_scope, self.env, self.hot = info, dict(self.env), False
        self.body(node.body)
        self.cls_scope, self.env, self.hot = outer_cls, outer_env, hot
        self.env[node.name] = Value(Kind.CLASS, ref=node.name) if info is not None else UNKNOWN
        self._dispatch(node)

    def st_Global(self, node: ast.stmt) -> None:
        self._dispatch(node)

    # ----------------------------------------------------------------- assignment
    def assign(self, target: ast.expr, value: Value, augmented: bool = False) -> None:
        if isinstance(target, ast.Name):
            if self.reporting:
                self.memo[target] = value
            self.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            star = next((i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)), None)
            for index, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    self.assign(elt.value, seq_of(element_of(value)))
                elif star is not None and index > star:
                    self.assign(elt, item_of(value, index - len(target.elts)))
                else:
                    self.assign(elt, item_of(value, index))
        elif isinstance(target, ast.Attribute):
            base = self.ev(target.value)
            if value.kind is Kind.UNKNOWN:
                hint = hint_for_name(target.attr)
                if hint is not None and hint.kind is not Kind.TENSOR:  # `self.loss = cfg.loss` is a name
                    value = hint
            key = self._self_attr_key(target)
            if key is not None:
                self.env[key] = value
            elif self.mode == SUMMARY and base.ref is not None and base.kind in (Kind.MODULE, Kind.OBJECT):
                cls = self.file.classes.get(base.ref)
                if cls is not None:
                    self._set_attr(cls, target.attr, value)
            if self.reporting:
                self.memo[target] = value
                self._dispatch(target)
        elif isinstance(target, ast.Subscript):
            self.ev(target)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value)

    # ----------------------------------------------------------------- expressions
    def ev(self, node: ast.expr) -> Value:
        handler = _EXPR_HANDLERS.get(type(node))
        value = handler(self, node) if handler is not None else self._ev_generic(node)
        if self.mode == REPORT and not self.silent:
            self.memo[node] = value
            if type(node) in self.file.dispatch:
                self._dispatch(node)
        return value

    def _evaluated(self, node: ast.expr, value: Value) -> Value:
        """What `ev` does after a handler: for nodes a handler evaluates itself."""
        if self.mode == REPORT and not self.silent:
            self.memo[node] = value
            if type(node) in self.file.dispatch:
                self._dispatch(node)
        return value

    def value(self, node: ast.expr) -> Value:
        """The value computed for `node` in this pass (rules' view)."""
        value = self.memo.get(node)
        if value is not None:
            return value
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        return UNKNOWN

    def _ev_generic(self, node: ast.expr) -> Value:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ev(child)
        return UNKNOWN

    def ev_Constant(self, node: ast.Constant) -> Value:
        if node.value is None:
            return NONE
        if type(node.value) is str and len(node.value) <= 12:
            where = classify_device(node.value)  # `device = "cuda" if ... else "cpu"`
            if where is not None and node.value.lower().rstrip(":0123456789") in _DEVICE_STRINGS:
                return DEVICE.with_device(where)
        return PYTHON

    def ev_Name(self, node: ast.Name) -> Value:
        return self.lookup(node.id)

    def ev_Attribute(self, node: ast.Attribute) -> Value:
        base = self.ev(node.value)
        key = self._self_attr_key(node)
        if key is not None:
            local = self.env.get(key)
            if local is not None:
                return local
        return self.attribute(base, node.attr)

    def attribute(self, base: Value, attr: str) -> Value:
        kind = base.kind
        if kind is Kind.REF:
            return ref(f"{base.ref}.{attr}")
        if kind is Kind.TENSOR:
            return tensor_attribute_value(attr, base)
        if kind is Kind.BATCH:
            # A batch is a tensor or a structure of them; `.shape` / `.dtype` / ... only
            # exist on the tensor.
            return tensor_attribute_value(attr, base) if attr in TENSOR_METADATA_ATTRS else base
        if kind in (Kind.MODULE, Kind.OBJECT, Kind.CLASS):
            cls = self.file.classes.get(base.ref) if base.ref else None
            if cls is not None:
                found = cls.lookup_attr(attr)
                if found is not None and found.kind is Kind.NONE:
                    # only ever `None` here (`self.train_loader = None` in `__init__`): what
                    # it holds when used is set elsewhere, and its name is the best guess
                    return _attribute_hint(attr)
                if found is not None:
                    return found
                method = cls.lookup_method(attr)
                if method is not None:
                    return Value(Kind.FUNC, ref=attr)
            if kind is Kind.MODULE:
                if attr == "training":
                    return PYTHON
                if attr == "device":
                    return DEVICE
                if attr in ("weight", "bias"):
                    if attr == "bias" and cls is not None and self.file._class_is(cls, _is_rnn_base):
                        return PYTHON  # `nn.LSTM(bias=True)` keeps a flag; weights are `bias_ih_l0`
                    return TENSOR
            return _attribute_hint(attr)
        if kind is Kind.SEQ and base.elem is not None and base.elem.kind is Kind.TENSOR:
            # named tuples of tensors: `x.max(1).values`, `torch.linalg.lstsq(a, b).solution`
            return base.elem
        if kind is Kind.NDARRAY:
            return PYTHON if attr in ("shape", "ndim", "size", "dtype") else NDARRAY
        if kind in (Kind.PYTHON, Kind.DEVICE, Kind.DTYPE, Kind.OPTIMIZER, Kind.NONE):
            return PYTHON
        if kind is Kind.UNKNOWN:
            return _attribute_hint(attr)
        return UNKNOWN

    def ev_Subscript(self, node: ast.Subscript) -> Value:
        base = self.ev(node.value)
        index = self.ev(node.slice)
        kind = base.kind
        if kind is Kind.TENSOR:
            return Value(Kind.TENSOR, dtype=base.dtype, device=base.device)
        if kind is Kind.SEQ:
            if isinstance(node.slice, ast.Slice):
                return base
            if base.items is not None and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                return item_of(base, node.slice.value)
            return base.elem or UNKNOWN
        if kind is Kind.BATCH:
            return base
        if kind is Kind.NDARRAY:
            return NDARRAY
        if kind is Kind.MODULE:
            return MODULE
        if kind is Kind.REF:
            return PYTHON  # typing subscripts: Optional[...]
        if kind is Kind.PYTHON and base.elem is not None:
            return base.elem  # a dict literal's values: `op_meta[name]`
        del index
        return UNKNOWN

    def ev_Slice(self, node: ast.Slice) -> Value:
        for child in (node.lower, node.upper, node.step):
            if child is not None:
                self.ev(child)
        return PYTHON

    def ev_Tuple(self, node: ast.Tuple) -> Value:
        return tuple_of(tuple(self.ev(e) for e in node.elts))

    def ev_List(self, node: ast.List) -> Value:
        items = tuple(self.ev(e) for e in node.elts)
        if not items:
            return Value(Kind.SEQ)
        return tuple_of(items)

    def ev_Set(self, node: ast.Set) -> Value:
        for e in node.elts:
            self.ev(e)
        return PYTHON

    def ev_Dict(self, node: ast.Dict) -> Value:
        values = []
        for key, val in zip(node.keys, node.values):
            if key is not None:
                self.ev(key)
            values.append(self.ev(val))
        if values and all(v.kind is Kind.TENSOR for v in values):
            return BATCH
        return _python_dict(values)

    def ev_JoinedStr(self, node: ast.JoinedStr) -> Value:
        for part in node.values:
            self.ev(part)
        return PYTHON

    def ev_FormattedValue(self, node: ast.FormattedValue) -> Value:
        self.ev(node.value)
        if node.format_spec is not None:
            self.ev(node.format_spec)
        return PYTHON

    def ev_UnaryOp(self, node: ast.UnaryOp) -> Value:
        operand = self.ev(node.operand)
        if isinstance(node.op, ast.Not):
            return PYTHON
        if operand.kind is Kind.TENSOR:
            return Value(Kind.TENSOR, dtype=operand.dtype, zero_dim=operand.zero_dim, device=operand.device)
        if operand.kind in (Kind.PYTHON, Kind.NDARRAY):
            return operand
        return UNKNOWN if operand.kind is not Kind.BATCH else Value(Kind.TENSOR, device=operand.device)

    def ev_BinOp(self, node: ast.BinOp) -> Value:
        # `a + b + c + ...` nests to the left as deep as it is long (generated code has
        # thousands of terms): walk the left spine in a loop, not by recursion, in exactly
        # the order recursion would (left operand, right operand, then the node itself).
        spine = [node]
        left_node = node.left
        while type(left_node) is ast.BinOp:
            spine.append(left_node)
            left_node = left_node.left
        left = self.ev(left_node)
        for inner in reversed(spine):
            right = self.ev(inner.right)
            left = self.binop(left, inner.op, right, inner.left, inner.right)
            if inner is not node:
                left = self._evaluated(inner, left)
        return left

    def binop(self, left: Value, op: ast.operator, right: Value, lnode: ast.expr, rnode: ast.expr) -> Value:
        if isinstance(op, ast.Mod) and (
            isinstance(lnode, (ast.Constant, ast.JoinedStr)) and isinstance(getattr(lnode, "value", ""), str)
        ):
            return PYTHON  # "%s" % x
        lk, rk = left.kind, right.kind
        if lk is Kind.TENSOR or rk is Kind.TENSOR or lk is Kind.BATCH or rk is Kind.BATCH:
            if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
                # Combining a mask with something: a mask, unless the other side is known
                # to hold another dtype.
                dtypes = {left.dtype, right.dtype}
                dtype = "bool" if "bool" in dtypes and dtypes <= {"bool", None} else None
            else:
                dtype = left.dtype if left.dtype == right.dtype else None
            zero_dim = (left.zero_dim or lk is Kind.PYTHON) and (right.zero_dim or rk is Kind.PYTHON)
            return Value(Kind.TENSOR, dtype=dtype, zero_dim=zero_dim, device=merged_device((left, right)))
        if lk is Kind.NDARRAY or rk is Kind.NDARRAY:
            return NDARRAY
        if lk is Kind.PYTHON and rk is Kind.PYTHON:
            return PYTHON
        if lk is Kind.SEQ and rk is Kind.SEQ and isinstance(op, ast.Add):
            return seq_of(join(left.elem or UNKNOWN, right.elem or UNKNOWN))
        return UNKNOWN

    def ev_Compare(self, node: ast.Compare) -> Value:
        values = [self.ev(node.left)] + [self.ev(c) for c in node.comparators]
        if any(isinstance(op, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in node.ops):
            return PYTHON
        if any(isinstance(c, ast.Constant) and isinstance(c.value, (str, bytes))
               for c in (node.left, *node.comparators)):
            return PYTHON  # `self.loss == "mse"`: tensors are never compared with strings
        if any(v.kind in (Kind.DTYPE, Kind.DEVICE) or (v.kind is Kind.REF and dtype_class_of(v.ref))
               for v in values):
            return PYTHON  # `x.dtype == torch.float16`
        tensors = [v for v in values if v.kind is Kind.TENSOR]
        if tensors:
            if any(isinstance(c, ast.Constant) and c.value is None for c in [node.left, *node.comparators]):
                return PYTHON
            zero = all(v.zero_dim or v.kind is Kind.PYTHON for v in values)
            return Value(Kind.TENSOR, dtype="bool", zero_dim=zero, device=merged_device(values))
        if any(v.kind is Kind.NDARRAY for v in values):
            return NDARRAY
        if all(v.kind in (Kind.PYTHON, Kind.NONE, Kind.DEVICE, Kind.DTYPE, Kind.REF, Kind.SEQ) for v in values):
            return PYTHON  # shapes and tuples compare to a Python bool
        if any(v.kind is Kind.BATCH for v in values):
            return Value(Kind.TENSOR, dtype="bool", device=merged_device(values))
        return UNKNOWN

    def ev_BoolOp(self, node: ast.BoolOp) -> Value:
        result: Value | None = None
        for v in node.values:
            value = self.ev(v)
            result = value if result is None else join(result, value)
        return result or UNKNOWN

    def ev_IfExp(self, node: ast.IfExp) -> Value:
        self.ev(node.test)
        eager = eager_truth(node.test, self.qualname)  # `a if torch.jit.is_tracing() else b`
        hot = self.hot
        self.hot = hot and eager is not False
        body = self.ev(node.body)
        self.hot = hot and eager is not True
        orelse = self.ev(node.orelse)
        self.hot = hot
        if eager is None:
            return join(body, orelse)
        return body if eager else orelse

    def ev_NamedExpr(self, node: ast.NamedExpr) -> Value:
        value = self.ev(node.value)
        self.assign(node.target, value)
        return value

    def ev_Lambda(self, node: ast.Lambda) -> Value:
        saved, hot = self.env, self.hot
        self.env = dict(saved)
        # The body runs when the lambda is called, which may be never: message thunks such
        # as `torch._check(cond, lambda: f"{t}")` are only called when the check fails.
        self.hot = False
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self.env[arg.arg] = UNKNOWN
        self.ev(node.body)
        self.env, self.hot = saved, hot
        return PYTHON

    def ev_Starred(self, node: ast.Starred) -> Value:
        return self.ev(node.value)

    def ev_Await(self, node: ast.Await) -> Value:
        return self.ev(node.value)

    def ev_Yield(self, node: ast.Yield | ast.YieldFrom) -> Value:
        value = self.ev(node.value) if node.value is not None else NONE
        if isinstance(node, ast.YieldFrom):
            value = element_of(value)
        if self.mode == SUMMARY:
            y = self.func.yields
            self.func.yields = value if y is None else join(y, value)
        return UNKNOWN

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                       elements: Callable[[], Value]) -> Value:
        saved_env, saved_hot = self.env, self.hot
        self.env = dict(saved_env)
        for gen in node.generators:
            iterable = self.ev(gen.iter)
            elem = element_of(iterable)
            if _is_data(iterable, elem):
                self.hot = True
            self.assign(gen.target, elem)
            for cond in gen.ifs:
                self.ev(cond)
        result = elements()
        self.env, self.hot = saved_env, saved_hot
        return result

    def ev_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> Value:
        return self._comprehension(node, lambda: seq_of(self.ev(node.elt)))

    def ev_DictComp(self, node: ast.DictComp) -> Value:
        def elements() -> Value:
            self.ev(node.key)
            value = self.ev(node.value)
            # `{k: v.cuda() for k, v in batch.items()}`: subscripts give the values back
            return _python_dict([value]) if value.kind in (Kind.TENSOR, Kind.BATCH) else PYTHON

        return self._comprehension(node, elements)

    # ----------------------------------------------------------------- calls
    def ev_Call(self, node: ast.Call) -> Value:
        func = node.func
        receiver: Value | None = None
        if isinstance(func, ast.Attribute):
            receiver = self.ev(func.value)
            callee = None
        else:
            callee = self.ev(func)
        args = [self.ev(a) for a in node.args]
        kwargs = {kw.arg: self.ev(kw.value) for kw in node.keywords}
        if receiver is not None:
            assert isinstance(func, ast.Attribute)
            result = self._method_call(node, func, receiver, args, kwargs)
        else:
            assert callee is not None
            result = self._call(node, callee, args, kwargs)
        if self.hot and self.reporting:
            for arg in args:  # closures handed to `optimizer.step(closure)` and the like
                if arg.kind is Kind.FUNC:
                    target = self._local_function(arg.ref)
                    if target is not None:
                        self.file.note_call(self.func, target, {}, self.mode, True, "called from hot code")
        return result

    def _method_call(self, node: ast.Call, func: ast.Attribute, recv: Value,
                     args: list[Value], kwargs: dict[str | None, Value]) -> Value:
        name = func.attr
        kind = recv.kind
        if kind is Kind.REF:
            return self._qualified_call(f"{recv.ref}.{name}", node, args, kwargs)
        if name == "backward" or name == "zero_grad":
            self._mark_step(trains=True)
        elif name == "step" and (kind is Kind.OPTIMIZER or is_optimizer_step_receiver(func.value)):
            self._mark_step(trains=True)
        if kind is Kind.TENSOR:
            return self._tensor_method(name, node, recv)
        if kind is Kind.BATCH:
            if name in ("to", "cuda", "cpu", "pin_memory", "float", "half", "bfloat16"):
                return recv.with_device(tensor_method_device(name, node, recv, self.qualname, self.value))
            if name == "items":
                return seq_of(tuple_of((PYTHON, recv)))
            if name == "values":
                return seq_of(recv)
            if name == "keys":
                return seq_of(PYTHON)
            if name in ("get", "pop"):
                return recv
            return self._tensor_method(name, node, Value(Kind.TENSOR, device=recv.device))
        if kind in (Kind.MODULE, Kind.OBJECT, Kind.CLASS):
            cls = self.file.classes.get(recv.ref) if recv.ref else None
            if name in ("register_buffer", "register_parameter") and cls is not None:
                self._register_attribute(cls, node, args)
            if cls is not None:
                method = cls.lookup_method(name)
                # `self.loss(...)` in a base class runs the subclasses' `loss` too; a mixin
                # calls what the classes mixing it in define.
                overrides = self.file.overrides(cls, name) if kind is not Kind.CLASS else []
                if method is not None or overrides:
                    result: Value | None = None
                    for target in ([method] if method is not None else []) + overrides:
                        bound = kind is not Kind.CLASS or "classmethod" in target.decorators
                        value = self._call_local(node, target, args, kwargs, bound=bound)
                        result = value if result is None else join(result, value)
                    assert result is not None
                    return result
                attr = cls.lookup_attr(name)
                if attr is not None:
                    if attr.kind is Kind.SEQ:
                        return self._seq_method(func, attr, name, args)
                    return self._call(node, attr, args, kwargs)
            if kind is Kind.MODULE:
                if name == "forward" or name in _MODEL_COMPUTE_METHODS:
                    self._mark_step()  # `model.decode(ys, memory)` runs the model too
                    return self._model_output(module_output(), args)
                known = module_method_value(name)
                if known.kind is not Kind.UNKNOWN:
                    return known
            return self._call_hinted(name, args, node)
        if kind is Kind.NDARRAY:
            return ndarray_method_value(name)
        if kind is Kind.SEQ:
            return self._seq_method(func, recv, name, args)
        if kind in (Kind.OPTIMIZER, Kind.DEVICE, Kind.DTYPE, Kind.LOADER, Kind.NONE):
            return PYTHON
        if kind is Kind.PYTHON:
            if name in ("item", "tolist", "format", "join", "split", "strip", "upper", "lower",
                        "replace", "startswith", "endswith", "encode", "decode", "keys"):
                return PYTHON
            if recv.elem is not None:  # a dict whose values are known
                if name in ("get", "pop", "setdefault"):
                    return recv.elem
                if name == "values":
                    return seq_of(recv.elem)
                if name == "items":
                    return seq_of(tuple_of((PYTHON, recv.elem)))
            return UNKNOWN
        if recv.ref is not None and recv.ref.startswith(_PROJECT_CLASS):
            self._note_project_method(recv, name, call_signature(node, args, kwargs))
        # UNKNOWN receiver: a tensor-only method proves it is a tensor.
        if name in TENSOR_ONLY_METHODS:
            if isinstance(func.value, ast.Name) and self.lookup(func.value.id).kind is Kind.UNKNOWN:
                self.env[func.value.id] = TENSOR
            return self._tensor_method(name, node, TENSOR)
        if name == "to":
            return self._tensor_method(name, node, TENSOR)
        if name == "cpu":  # a tensor (or a module) now in host memory: `model.generate(x).cpu()`
            return Value(Kind.TENSOR, device="cpu")
        if name == "numpy":
            return NDARRAY
        if name == "tolist":
            return PYTHON
        return self._call_hinted(name, args, node)

    def _tensor_method(self, name: str, node: ast.Call, recv: Value) -> Value:
        value = tensor_method_value(name, node, recv, self.qualname)
        if value.kind is Kind.TENSOR:
            return value.with_device(tensor_method_device(name, node, recv, self.qualname, self.value))
        if value.kind is Kind.SEQ and value.elem is not None and value.elem.kind is Kind.TENSOR:
            return Value(Kind.SEQ, elem=value.elem.with_device(recv.device))  # `x.sort()`, `x.max(1)`
        return value

    def _call_hinted(self, name: str, args: list[Value] | None = None, node: ast.Call | None = None) -> Value:
        """`trainer.model(x)`, `self.criterion(out, y)`: the attribute's name says it is a module."""
        if node is not None and _tokenizer_call(node):
            return _HOST_BATCH
        hint = hint_for_name(name)
        if hint is not None and hint.kind is Kind.MODULE:
            self._mark_step()
            return self._model_output(module_output(hint.loss), args or [])
        return UNKNOWN

    def _model_output(self, result: Value, args: list[Value]) -> Value:
        """In a file that never mentions an accelerator, a model given CPU tensors (batches of
        a DataLoader, `torch.from_numpy(...)`) computes on the CPU: a script that trains on
        the CPU waits for no GPU."""
        if not self.file.host_only or result.kind not in (Kind.TENSOR, Kind.BATCH):
            return result
        tensors = [a for a in args if a.kind in (Kind.TENSOR, Kind.BATCH)]
        if tensors and all(a.on_cpu for a in tensors):
            return result.with_device("cpu")
        return result

    def _register_attribute(self, cls: ClassInfo, node: ast.Call, args: list[Value]) -> None:
        """`self.register_buffer("name", t)` makes `self.name` a tensor."""
        if self.mode != SUMMARY or not node.args:
            return
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            value = args[1] if len(args) > 1 and args[1].kind is Kind.TENSOR else TENSOR
            # Buffers and parameters move with the module (`model.cuda()`): device unknown.
            self._set_attr(cls, first.value, value.with_device(None))

    def _seq_method(self, func: ast.Attribute, recv: Value, name: str, args: list[Value]) -> Value:
        if name in ("append", "extend", "insert") and args and isinstance(func.value, ast.Name):
            added = args[-1] if name != "extend" else element_of(args[-1])
            old = recv.elem
            elem = added if old is None else join(old, added)
            self.env[func.value.id] = Value(Kind.SEQ, elem=elem)
            return NONE
        if name == "pop":
            return recv.elem or UNKNOWN
        if name in ("index", "count"):
            return PYTHON
        if name == "copy":
            return recv
        return NONE

    def _call(self, node: ast.Call, callee: Value, args: list[Value], kwargs: dict[str | None, Value]) -> Value:
        kind = callee.kind
        if kind is Kind.UNKNOWN and _tokenizer_call(node):
            return _HOST_BATCH
        if kind is Kind.REF:
            return self._qualified_call(callee.ref or "", node, args, kwargs)
        if kind is Kind.FUNC:
            target = self._local_function(callee.ref)
            if target is not None:
                return self._call_local(node, target, args, kwargs, bound=False)
            return UNKNOWN
        if kind is Kind.CLASS:
            cls = self.file.classes.get(callee.ref or "")
            if cls is None:
                return UNKNOWN
            init = cls.lookup_method("__init__")
            if init is not None:
                self._call_local(node, init, args, kwargs, bound=True)
            return cls.instance()
        if kind is Kind.MODULE:
            if not (isinstance(node.func, ast.Name) and self.loops and node.func.id in self.loops[-1].targets):
                self._mark_step()  # not `for encoder in encoders: encoder(x)`: a loop over models
            cls = self.file.classes.get(callee.ref) if callee.ref else None
            forward = cls.lookup_method("forward") if cls is not None else None
            if forward is None and cls is not None:
                forward = cls.lookup_method("__call__")
            if forward is not None:
                result = self._call_local(node, forward, args, kwargs, bound=True)
                if result.kind is not Kind.UNKNOWN and result.kind is not Kind.NONE:
                    return self._model_output(result, args)
            return self._model_output(module_output(callee.loss), args)
        if kind is Kind.OBJECT:
            cls = self.file.classes.get(callee.ref) if callee.ref else None
            call = cls.lookup_method("__call__") if cls is not None else None
            if call is not None:
                return self._call_local(node, call, args, kwargs, bound=True)
            return UNKNOWN
        if kind is Kind.UNKNOWN and callee.ref is not None and callee.ref.startswith(_PROJECT_CLASS):
            # `self.matcher(quality)` runs `Matcher.__call__`; `self.block(x)` runs a module's
            # forward, hot in its file anyway: no seed (each seed re-analyzes a file)
            if not _is_module_base(callee.ref):
                self._note_project_method(callee, "__call__", call_signature(node, args, kwargs))
            return UNKNOWN
        if kind is Kind.UNKNOWN and isinstance(node.func, ast.Name) and is_loss_function_name(node.func.id):
            return TENSOR
        return UNKNOWN

    def _note_project_method(self, instance: Value, method: str, signature: str) -> None:
        """A method of a class from another project file, called from hot code: hot there."""
        if self.hot and self.reporting and instance.ref is not None:
            self.file.external_hot_calls.add(f"{instance.ref[len(_PROJECT_CLASS):]}.{method}{signature}")

    def _qualified_call(self, qualname: str, node: ast.Call, args: list[Value],
                        kwargs: dict[str | None, Value]) -> Value:
        if qualname in ("builtins.next", "builtins.iter") and args and args[0].kind is Kind.LOADER:
            if qualname == "builtins.next":
                self._mark_step(trains=True)  # `next(loader_iter)`: a loop over the data
        if self.hot and self.reporting and may_be_project_function(qualname):
            self.file.external_hot_calls.add(qualname + call_signature(node, args, kwargs))
        value = external_call_value(qualname, node, args, self.qualname)
        if value.kind is Kind.UNKNOWN and may_be_project_function(qualname) \
                and qualname.rsplit(".", 1)[-1][:1].isupper():
            # `ConfusionMatrix(nc)` from the user's `utils.metrics`: remember the class, so
            # its methods called every step are hot in their own file (the project pass)
            return Value(Kind.UNKNOWN, ref=_PROJECT_CLASS + qualname)
        if qualname.startswith("torch."):
            if value.kind is Kind.TENSOR:
                if qualname.startswith("torch.Tensor.") and args:
                    device = tensor_method_device(qualname.rsplit(".", 1)[1], node, args[0], self.qualname, self.value)
                elif qualname.count(".") == 1:
                    device = torch_call_device(qualname[6:], node, args, self.qualname, self.value)
                elif qualname in MODULE_STATE_CONSTRUCTORS:
                    device = None
                else:
                    device = merged_device(args)
                value = value.with_device(device)
            elif value.kind is Kind.SEQ and value.elem is not None and value.elem.kind is Kind.TENSOR:
                # tuples of tensors (`torch.sort`, `torch.linalg.lstsq`): where the inputs are
                device = merged_device(args)
                value = Value(Kind.SEQ, elem=value.elem.with_device(device))
            elif value.kind is Kind.LOADER:
                batch = Value(Kind.BATCH, data=True, device="cpu", origin=node)
                value = Value(Kind.LOADER, elem=batch, origin=node)
            elif value.kind is Kind.DEVICE and node.args:
                value = value.with_device(device_of_expr(node.args[0], self.qualname, self.value))
        return value

    def _local_function(self, name: str | None) -> FunctionInfo | None:
        if name is None:
            return None
        # Nested functions visible from here, innermost first, then module level.
        scope: FunctionInfo | None = self.func
        local = self.file.local_functions
        while scope is not None:
            found = local.get((id(scope), name))
            if found is not None:
                return found
            scope = scope.parent
        return local.get((0, name))

    def _call_local(self, node: ast.Call, target: FunctionInfo, args: list[Value],
                    kwargs: dict[str | None, Value], bound: bool) -> Value:
        if self.mode == SUMMARY:
            self.file.ensure_summary(target)
        binding = self._bind(target, node, args, kwargs, bound) if not self.silent else {}
        if self.mode == SUMMARY:
            target.local_calls += 1
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                target.opaque_calls = True  # `f(*args, **kwargs)` may pass anything
        if not self.silent:
            reason = f"called from hot code in `{self.func.name}`"
            self.file.note_call(self.func, target, binding, self.mode, self.hot, reason)
        if target.steps and not target.loops_steps and not self.file.is_test(target):
            self._mark_step()  # `self.fit_batch(batch)`, `next_token(model, x)`
        if target.loops_steps and self.loops:  # `train_one_epoch(...)` in a loop: an epoch loop
            self.loops[-1].nested_data = True
        result = target.result
        if result.kind in (Kind.UNKNOWN, Kind.NONE) and isinstance(target.node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotated = annotation_value(target.node.returns)
            if annotated is not None:
                return annotated
        return result

    def _bind(self, target: FunctionInfo, node: ast.Call, args: list[Value],
              kwargs: dict[str | None, Value], bound: bool) -> dict[str, Value]:
        fnode = target.node
        if not isinstance(fnode, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return {}
        params = [a.arg for a in fnode.args.posonlyargs + fnode.args.args]
        if bound and target.is_method and params:
            params = params[1:]
        binding: dict[str, Value] = {}
        for index, (arg_node, value) in enumerate(zip(node.args, args)):
            if isinstance(arg_node, ast.Starred) or index >= len(params):
                break
            binding[params[index]] = value
        for key, value in kwargs.items():
            if key is not None:
                binding[key] = value
        return binding


_PYTHON_TYPES = frozenset(
    """builtins.int builtins.float builtins.bool builtins.str builtins.bytes builtins.list
    builtins.tuple builtins.dict builtins.set int float bool str bytes list tuple dict set
    numbers.Number numbers.Real numbers.Integral collections.abc.Sequence collections.abc.Mapping
    typing.Sequence typing.Mapping""".split()
)


_TOKENIZER = re.compile(r"(?:^|_)(?:tokenizer|processor|feature_extractor|image_processor)(?:_\d+)?$")
# What a Hugging Face tokenizer / processor returns with `return_tensors="pt"`: tensors built
# on the CPU from Python data.
_HOST_BATCH = Value(Kind.BATCH, device="cpu")


def _tokenizer_call(node: ast.Call) -> bool:
    """`tokenizer(text, return_tensors="pt")`, `self.processor(images=x, return_tensors="pt")`."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return bool(_TOKENIZER.search(name.lower())) and any(kw.arg == "return_tensors" for kw in node.keywords)


def _cpu_check_subject(test: ast.expr) -> str | None:
    """The name `x.device.type == "cpu"` (or `not x.is_cuda`) proves to be on the CPU."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Attribute) \
            and test.operand.attr == "is_cuda" and isinstance(test.operand.value, ast.Name):
        return test.operand.value.id
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    sides = (test.left, test.comparators[0])
    if not any(isinstance(s, ast.Constant) and s.value == "cpu" for s in sides):
        return None
    for side in sides:
        if isinstance(side, ast.Attribute) and side.attr == "type" and isinstance(side.value, ast.Attribute) \
                and side.value.attr == "device" and isinstance(side.value.value, ast.Name):
            return side.value.value.id
    return None


def _tensor_check_subject(test: ast.expr, qualname) -> str | None:
    """The name `isinstance(t, torch.Tensor)` / `torch.is_tensor(t)` checks, if it is one."""
    if not (isinstance(test, ast.Call) and test.args and isinstance(test.args[0], ast.Name)):
        return None
    if isinstance(test.func, ast.Name) and test.func.id == "isinstance" and len(test.args) == 2:
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        names = [qualname(k) or _dotted(k) for k in kinds]
        if names and all(_isinstance_value(n) is TENSOR for n in names):
            return test.args[0].id
        return None
    if qualname(test.func) == "torch.is_tensor" and len(test.args) == 1:
        return test.args[0].id
    return None


def _isinstance_value(qualname: str) -> Value | None:
    """What `isinstance(x, T)` proves x is, for the types that matter here."""
    if qualname in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        return TENSOR
    if qualname in ("torch.nn.Module", "torch.nn.modules.module.Module"):
        return MODULE
    if qualname.startswith(("numpy.", "np.")):
        return NDARRAY
    if qualname in _PYTHON_TYPES:
        return PYTHON
    if qualname.startswith(("torch.nn.", "nn.")) and qualname.rsplit(".", 1)[-1][:1].isupper():
        return MODULE  # `isinstance(m, nn.Linear)`
    last = qualname.rsplit(".", 1)[-1]
    if last.startswith("NonTensor"):
        return Value(Kind.OBJECT)  # tensordict's wrappers of non-tensor data
    if last.endswith("Tensor"):
        return TENSOR  # `MetaTensor`, `DTensor`: tensor subclasses
    return None  # other classes may subclass Tensor too (PyG's `EdgeIndex`): no narrowing


def _python_dict(values: list[Value]) -> Value:
    """A dict literal: a Python value whose subscripts give (the join of) its values."""
    if not values:
        return PYTHON
    elem = values[0]
    for value in values[1:]:
        elem = join(elem, value)
    return Value(Kind.PYTHON, elem=elem)


def _attribute_hint(attr: str) -> Value:
    """What `obj.<attr>` holds by its name alone: modules, loaders, devices... but never
    "a tensor" (`self.config.auxiliary_loss` is a flag, not a loss)."""
    hint = hint_for_name(attr)
    return hint if hint is not None and hint.kind is not Kind.TENSOR else UNKNOWN


def merged_device(values: Iterable[Value]) -> str | None:
    """The device of an elementwise result: known only when every tensor operand agrees.

    Unknown operands are taken to be Python numbers (hyperparameters such as
    `self.layerdrop`): the usual case next to a known tensor.
    """
    device: str | None = None
    seen = False
    for value in values:
        if value.kind in (Kind.TENSOR, Kind.BATCH):
            if value.device is None:
                return None
            if seen and value.device != device:
                return None
            device, seen = value.device, True
    return device


# Names of step counters: `step`, `global_step`, `batch_idx`, `it`, `epoch`, `self.iteration`.
_STEP_COUNTER = re.compile(r"step|iter|epoch|(?:^|_)(?:batch_?(?:idx|id|i|num|index|nb)|it|itr|ni|bi|nb)$")
_TEST_NAME = re.compile(r"test(?:_|[A-Z0-9]|$)")
_FEW_STEPS = 16  # `if batch_idx < 3:` draws a few pictures; it does not run every step


def _loop_counters(node: ast.For | ast.AsyncFor) -> frozenset[str]:
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


def _few_iterations(iterable: ast.expr) -> bool:
    """`zip(range(3), loader)` / `itertools.islice(loader, 4)`: a few batches (pictures of
    the first validation batches), not a loop over the data; `for cfg in [(...), (...)]`: a
    sweep over a few written-out configurations."""
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return len(iterable.elts) <= _FEW_STEPS
    if not isinstance(iterable, ast.Call):
        return False
    name = _dotted(iterable.func)
    if name == "zip":
        return any(isinstance(a, ast.Call) and _dotted(a.func) == "range" and _small_constant_args(a)
                   for a in iterable.args)
    if name in ("islice", "itertools.islice") and len(iterable.args) == 2:
        bound = iterable.args[1]
        return isinstance(bound, ast.Constant) and type(bound.value) is int and bound.value <= _FEW_STEPS
    return False


def _small_constant_args(call: ast.Call) -> bool:
    return bool(call.args) and all(
        isinstance(a, ast.Constant) and type(a.value) is int and a.value <= _FEW_STEPS for a in call.args)


def _is_data(iterable: Value, elem: Value) -> bool:
    """Does iterating this yield batches of data (a DataLoader, `enumerate(loader)`, ...)?"""
    if iterable.kind is Kind.LOADER or elem.data:
        return True
    if elem.kind is Kind.SEQ and elem.items is not None:
        return any(item.data for item in elem.items)
    return False


def _pattern_names(pattern: ast.AST) -> Iterable[str]:
    for node in ast.walk(pattern):
        name = getattr(node, "name", None)
        if isinstance(name, str):
            yield name
        rest = getattr(node, "rest", None)
        if isinstance(rest, str):
            yield rest


_STMT_HANDLERS: dict[type, Callable[[_Walker, ast.stmt], None]] = {
    ast.Expr: _Walker.st_Expr,
    ast.Assign: _Walker.st_Assign,
    ast.AnnAssign: _Walker.st_AnnAssign,
    ast.AugAssign: _Walker.st_AugAssign,
    ast.Return: _Walker.st_Return,
    ast.If: _Walker.st_If,
    ast.For: _Walker.st_For,
    ast.AsyncFor: _Walker.st_For,
    ast.While: _Walker.st_While,
    ast.Try: _Walker.st_Try,
    ast.With: _Walker.st_With,
    ast.AsyncWith: _Walker.st_With,
    ast.Raise: _Walker.st_Raise,
    ast.Assert: _Walker.st_Assert,
    ast.Delete: _Walker.st_Delete,
    ast.Import: _Walker.st_Import,
    ast.ImportFrom: _Walker.st_ImportFrom,
    ast.FunctionDef: _Walker.st_FunctionDef,
    ast.AsyncFunctionDef: _Walker.st_FunctionDef,
    ast.ClassDef: _Walker.st_ClassDef,
    ast.Global: _Walker.st_Global,
    ast.Nonlocal: _Walker.st_Global,
    ast.Pass: _Walker.st_Global,
    ast.Break: _Walker.st_Global,
    ast.Continue: _Walker.st_Global,
}
if hasattr(ast, "Match"):
    _STMT_HANDLERS[ast.Match] = _Walker.st_Match
if hasattr(ast, "TryStar"):
    _STMT_HANDLERS[ast.TryStar] = _Walker.st_Try  # type: ignore[attr-defined]

_EXPR_HANDLERS: dict[type, Callable[[_Walker, ast.expr], Value]] = {
    ast.Constant: _Walker.ev_Constant,
    ast.Name: _Walker.ev_Name,
    ast.Attribute: _Walker.ev_Attribute,
    ast.Subscript: _Walker.ev_Subscript,
    ast.Slice: _Walker.ev_Slice,
    ast.Tuple: _Walker.ev_Tuple,
    ast.List: _Walker.ev_List,
    ast.Set: _Walker.ev_Set,
    ast.Dict: _Walker.ev_Dict,
    ast.JoinedStr: _Walker.ev_JoinedStr,
    ast.FormattedValue: _Walker.ev_FormattedValue,
    ast.UnaryOp: _Walker.ev_UnaryOp,
    ast.BinOp: _Walker.ev_BinOp,
    ast.Compare: _Walker.ev_Compare,
    ast.BoolOp: _Walker.ev_BoolOp,
    ast.IfExp: _Walker.ev_IfExp,
    ast.NamedExpr: _Walker.ev_NamedExpr,
    ast.Lambda: _Walker.ev_Lambda,
    ast.Starred: _Walker.ev_Starred,
    ast.Await: _Walker.ev_Await,
    ast.Yield: _Walker.ev_Yield,
    ast.YieldFrom: _Walker.ev_Yield,
    ast.ListComp: _Walker.ev_ListComp,
    ast.SetComp: _Walker.ev_ListComp,
    ast.GeneratorExp: _Walker.ev_ListComp,
    ast.DictComp: _Walker.ev_DictComp,
    ast.Call: _Walker.ev_Call,
}

__all__ = ["FileAnalysis", "FunctionInfo", "ClassInfo", "annotation_value", "TENSOR_ONLY_METHODS"]
