"""What one file defines, and the state its walkers share.

`FileFacts` collects the module's defs and classes once (which functions loop; which classes
are modules, losses, optimizers, data pipelines...) and holds what the passes learn as they
go: the module's environment, the calls between the file's functions, the calls into other
project files. `analysis.FileAnalysis` runs the passes on top of it.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Protocol

from .calls import may_be_project_function
from .environment import Env, import_bindings
from .hints import is_module_base
from .hotness import (
    CACHING_DECORATORS,
    COLD_METHODS,
    is_loss_function_name,
    is_test_function_name,
)
from .throttling import throttling_helpers, unit_intervals
from .project_calls import CrossFile
from .records import SUMMARY, ClassInfo, FunctionInfo, HotChain
from .syntax import SCANNED, child_nodes, contains_comprehension, decorator_name, dotted, walk_nodes
from .values import Kind, Value, join

# A rule's `visit_<Type>` method: called with the node and the rules' context.
Visitor = Callable[[ast.AST, Any], None]


def _subset(dispatch: dict[type, list[Visitor]], keep: Callable[[Visitor], bool]) -> dict[type, list[Visitor]]:
    kept = {node_type: [rule for rule in rules if keep(rule)] for node_type, rules in dispatch.items()}
    return {node_type: rules for node_type, rules in kept.items() if rules}


class RuleHost(Protocol):
    """What the walkers need of the context handed to rules (`context.RuleContext`, one
    layer up): to be told which walker is asking, and which rule and node it enters."""

    _walker: Any

    def _enter(self, visitor: object, node: ast.AST) -> None: ...


class FileFacts:
    """What one parsed file defines, and what its passes have learned so far."""

    def __init__(
        self,
        tree: ast.Module,
        dispatch: dict[type, list[Visitor]] | None = None,
        hot_only: dict[Callable, bool] | None = None,
        hot_functions: frozenset[str] = frozenset(),
        test_file: bool = False,
        host_only: bool = False,
        transforms_file: bool = False,
        per_sample: set[Callable] | None = None,
        mentions_collate_fn: bool = True,
    ) -> None:
        self.tree = tree
        # rules that also run in the data pipeline's per-sample code (see `is_per_sample`)
        self.per_sample_rules: set[Callable] = per_sample or set()
        # functions passed as `collate_fn=` (found on first use; none when the source never
        # says `collate_fn`, which spares a walk of the whole tree)
        self._collate_names: set[str] | None = None if mentions_collate_fn else set()
        self.test_file = test_file  # pytest's file: its `test_*` functions are tests
        # The file never names an accelerator or a device: what it builds stays on the CPU.
        self.host_only = host_only
        # `transforms/` or `transforms.py`: its classes are data transforms (run in the
        # DataLoader's workers), even when they subclass nn.Module
        self.transforms_file = transforms_file
        # what crosses the file's boundary (the project pass), both ways: its seeds and the
        # calls, loaders and summaries it hands to other files
        self.cross = CrossFile(hot_functions)
        # module-level functions other files call every step (the project pass)
        # "name" or "Class.method" -> the argument kinds other files pass ("f(t,-)": see
        # `call_signature`)
        self.hot_functions: dict[str, list[str]] = self.cross.hot
        # qualified names called from hot code that may be functions of other project files
        self.external_hot_calls: set[str] = self.cross.hot_calls
        # each of them -> the chain that makes the call run every step (the first one seen)
        self.external_hot_call_origins: dict[str, tuple[HotChain, str | None]] = {}
        self.dispatch = dispatch or {}
        self.hot_only = hot_only or {}
        # the visitors called off the hot path: those that also report cold code, and those
        # plus the per-sample ones in the data pipeline (each in the dispatch's order)
        self.cold_dispatch = _subset(self.dispatch, lambda rule: not self.hot_only.get(rule, True))
        self.per_sample_dispatch = _subset(
            self.dispatch, lambda rule: not self.hot_only.get(rule, True) or rule in self.per_sample_rules)
        self.classes: dict[str, ClassInfo] = {}
        # each def and class node -> its record (a map, not an attribute on the node: the
        # tree would hold its records and they the tree, a cycle only the collector frees)
        self.info_of: dict[ast.AST, FunctionInfo | ClassInfo] = {}
        self.functions: list[FunctionInfo] = []
        self.local_functions: dict[tuple[int, str], FunctionInfo] = {}
        self.module = FunctionInfo("<module>", tree)
        self.module_env: Env = {}
        self.context: RuleHost | None = None
        self.imports_torch = False
        # the modules of the file's module-level `from m import *` that may be the project's
        # (torch-ngp's `from nerf.utils import *` then `Trainer(...)`): where free names come from
        self.star_modules: list[str] = []
        self.cold_rules_enabled = any(not v for v in self.hot_only.values())
        self._subclasses: dict[int, list[ClassInfo]] | None = None
        self._throttling_helpers: frozenset[str] | None = None
        self._unit_intervals: frozenset[str] | None = None
        self._collect(tree.body, parent=None, cls=None)
        self._link_classes()

    def throttling_helpers(self) -> frozenset[str]:
        """Module-level functions (and, as `self.name`, methods) that return a throttled test
        (`divisible_by(step, n)`, `self.check_frequency(idx)`)."""
        if self._throttling_helpers is None:
            self._throttling_helpers = throttling_helpers(
                info.node for (owner, _), info in self.local_functions.items() if owner == 0
            ) | throttling_helpers(
                (info.node for info in self.functions if info.cls is not None and info.parent is None), prefix="self."
            )
        return self._throttling_helpers

    def unit_intervals(self) -> frozenset[str]:
        """Module-level names set to 1 (`log_interval = 1`): `step % name == 0` is every step."""
        if self._unit_intervals is None:
            self._unit_intervals = unit_intervals(self.tree)
        return self._unit_intervals

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
                decorators = frozenset(decorator_name(d) for d in node.decorator_list)
                info = FunctionInfo(node.name, node, cls=owner_cls, parent=owner, decorators=decorators)
                self.functions.append(info)
                if owner_cls is not None:
                    owner_cls.methods.setdefault(node.name, info)
                else:
                    self.local_functions[(id(owner) if owner else 0, node.name)] = info
                self.info_of[node] = info
                stack.extend((child, info, None) for child in reversed(node.body))
                continue
            if isinstance(node, ast.ClassDef):
                bases = [dotted(b) for b in node.bases]
                info_c = ClassInfo(node.name, node, [b for b in bases if b],
                                   top_level=owner is None and owner_cls is None)
                self.classes.setdefault(node.name, info_c)
                self.info_of[node] = info_c
                stack.extend((child, owner, info_c) for child in reversed(node.body))
                continue
            target = owner or self.module
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                target.has_loop = target.has_statement_loop = True
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                names = [module or ""] + [a.name for a in node.names]
                if any(n == "torch" or n.startswith("torch.") for n in names):
                    self.imports_torch = True
                if owner is None and isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
                    module = "." * node.level + (node.module or "")
                    if may_be_project_function(module + ".x"):
                        self.star_modules.append(module)
            # Statements are walked here, in the same order as always (it decides which of
            # two same-named defs wins); expressions hold no statements, only comprehensions,
            # so they are scanned afterwards and only for functions not yet known to loop.
            for child in child_nodes(node):
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                    stack.append((child, owner, owner_cls))
                elif isinstance(child, SCANNED) and not target.has_loop:
                    expressions.append((target, child))
        for target, expr in expressions:
            if not target.has_loop and contains_comprehension(expr):
                target.has_loop = True

    def release(self) -> None:
        """Cut the links between the records once the file is done (methods and their class,
        callers and callees, nested functions and their parent): the records reach the
        tree, and without the cycles it is freed when the last reference goes, not by a
        pass of the cyclic collector over every node."""
        for func in self.functions:
            func.callees = []
            func.cls = func.parent = None
        self.module.callees = []
        for cls in self.classes.values():
            cls.methods = {}
            cls.local_bases = []
        self._subclasses = None

    def _link_classes(self) -> None:
        for cls in self.classes.values():
            for base in cls.base_names:
                local = self.classes.get(base.rsplit(".", 1)[-1]) if "." not in base else None
                if local is not None and local is not cls:
                    cls.local_bases.append(local)
        for cls in self.classes.values():
            cls.is_module = self.class_is(cls, is_module_base)
            cls.is_loss = cls.name.endswith("Loss") or self.class_is(cls, lambda b: b.endswith("Loss"))
            cls.is_optimizer = self.class_is(cls, lambda b: b.endswith("Optimizer"))
            cls.is_scheduler = cls.name.endswith("Scheduler") or self.class_is(cls, lambda b: b.endswith("Scheduler"))
            cls.is_metric = cls.name.endswith("Metric") or self.class_is(cls, lambda b: b.endswith("Metric"))
            cls.is_data_pipeline = self.transforms_file or self.class_is(cls, _is_data_pipeline_base)
            cls.is_autograd_function = self.class_is(
                cls, lambda b: b in ("Function", "torch.autograd.Function", "autograd.Function")
            )

    def is_test(self, func: FunctionInfo) -> bool:
        """A pytest test function (`test_*` in a test file): it checks, it does not train."""
        return self.test_file and is_test_function_name(func.name)

    def is_per_sample(self, func: FunctionInfo) -> bool:
        """Code the data pipeline runs for every sample or batch: a dataset's `__getitem__`, a
        transform's `__call__`, a collate function (named so, or passed as `collate_fn=`)."""
        if func.cls is not None:
            return func.cls.is_data_pipeline and func.name in _PER_SAMPLE_METHODS
        if func.parent is not None:
            return False
        if self._collate_names is None:
            self._collate_names = {kw.value.id for node in walk_nodes(self.tree) if isinstance(node, ast.Call)
                                   for kw in node.keywords
                                   if kw.arg == "collate_fn" and isinstance(kw.value, ast.Name)}
        return "collate" in func.name.lower() or func.name in self._collate_names

    def overrides(self, cls: ClassInfo, name: str) -> list[FunctionInfo]:
        """Methods called `name` that classes derived from `cls` in this file define."""
        if self._subclasses is None:
            self._subclasses = {}
            for sub in self.classes.values():
                for base in sub.lineage():
                    if base is not sub:
                        self._subclasses.setdefault(id(base), []).append(sub)
        return [sub.methods[name] for sub in self._subclasses.get(id(cls), []) if name in sub.methods]

    def class_is(self, cls: ClassInfo, predicate: Callable[[str], bool]) -> bool:
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

    def _module_declarations(self) -> Env:
        """Names bound by module-level imports, defs and classes (also under if / try)."""
        env: Env = {}
        stack: list[ast.stmt] = list(reversed(self.tree.body))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                env.update(import_bindings(node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node in self.info_of:
                    env[node.name] = Value(Kind.FUNC, ref=node.name)
            elif isinstance(node, ast.ClassDef):
                if node in self.info_of:
                    env[node.name] = Value(Kind.CLASS, ref=node.name)
            elif isinstance(node, _BRANCHING):
                children = list(node.body) + list(node.orelse)
                for handler in getattr(node, "handlers", []):
                    children.extend(handler.body)
                children.extend(getattr(node, "finalbody", []))
                stack.extend(reversed(children))
        return env

    # ----------------------------------------------------------------- call graph
    def note_call(self, caller: FunctionInfo, callee: FunctionInfo, binding: dict[str, Value],
                  mode: int, hot: bool, reason: str,
                  origin: tuple[HotChain, str | None] = ((), None), row: int = 0) -> None:
        """`caller` calls `callee` at `row`, passing `binding`; in hot code whose chain is
        `origin`, the callee becomes hot too."""
        if mode != SUMMARY and not hot and is_device_generic(callee):
            # A smoke test under `if __name__ == "__main__":` or a CPU check calls a model or a
            # loss with CPU tensors; its users run it on the accelerator: one cold caller
            # never decides where the tensors of device-generic code live.
            binding = {name: _any_device(value) for name, value in binding.items()}
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
                and not callee.decorators & CACHING_DECORATORS:
            callee.hot, callee.hot_reason = True, reason
            callee.hot_chain = origin[0] + ((row, f"calls `{callee.display_name}`"),)
            callee.hot_seed = origin[1]

    def ensure_summary(self, func: FunctionInfo) -> None:
        """Interpret `func` for its summary, unless that is done or under way: the walkers
        call it before they use a callee's summary (`analysis.FileAnalysis` does the work)."""
        raise NotImplementedError


def is_device_generic(func: FunctionInfo) -> bool:
    """Code written for tensors on any device: the methods of a model or a loss class, a
    loss function, a function that takes a `device`."""
    cls = func.cls
    if cls is not None and (cls.is_module or cls.is_loss) and not cls.is_data_pipeline:
        return True
    if cls is None and func.parent is None and is_loss_function_name(func.name):
        return True
    node = func.node
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        a.arg == "device" for a in node.args.args + node.args.kwonlyargs)


def _any_device(value: Value) -> Value:
    return value.with_device(None) if value.on_cpu else value


# Statements whose blocks hold definitions the module may run (`try: import ... except:`);
# TryStar (Python 3.11+) has the same blocks as Try.
_BRANCHING: tuple[type[ast.If] | type[ast.Try], ...] = (ast.If, ast.Try, getattr(ast, "TryStar", ast.Try))
_PER_SAMPLE_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__", "__next__", "__call__", "forward",
                                 "transform", "collate", "collate_fn"})


def _is_data_pipeline_base(base: str) -> bool:
    last = base.rsplit(".", 1)[-1]
    return last.endswith(("Dataset", "Transform")) or last in ("IterableDataset", "Sampler")


def is_rnn_base(base: str) -> bool:
    return base.rsplit(".", 1)[-1] in ("RNNBase", "RNN", "LSTM", "GRU")
