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

The facts are split by concern; each module imports only modules listed before it:
  values, torch_api, hints            the abstract values; what torch calls and names give
  syntax, hotness                     questions about syntax alone (hotness: the hot path's)
  calls, shapes                       values of other libraries' calls; shapes fixes need
  environment                         environments, their joins, annotations, narrowing
  records                             FunctionInfo, ClassInfo, LoopInfo
  hot_regions                         hot-path decisions over those records
  summaries                           what crosses files: value codes, parameter markers
  specializing                        which calls are worth walking a callee again for
  project_calls                       the file's side of the project pass
  file_facts                          what the file defines; the state the walkers share
  frame, expressions, call_interpreter, dispatch, walker
                                      the walker, one layer (a subclass) per module
  analysis (here)                     the two passes
  context                             what rules see: RuleContext
"""

from __future__ import annotations

import ast

from .call_interpreter import TENSOR_ONLY_METHODS
from .environment import annotation_value, join_env
from .expressions import EXPR_HANDLERS
from .file_facts import FileFacts
from .hot_regions import seed_reason
from .project_calls import bind_foreign_arguments, shape_binding, tensor_shape
from .records import REPORT, SUMMARY, ClassInfo, FunctionInfo
from .summaries import NOTHING, PLAIN, Decoder, code_of, export, function_key, informative
from .values import Kind
from .walker import Walker


class FileAnalysis(FileFacts):
    """Facts about one parsed file; drives the two passes and dispatches to rules."""

    # ----------------------------------------------------------------- passes
    def run(self) -> None:
        self._inherited_seeds()
        self._bind_foreign_arguments()
        self._summaries()
        self._seed_hot_functions()
        self._report()
        self.summaries = export(self.functions, self.cross.moves, _annotated) + self._shaped_summaries()

    def _shaped_summaries(self) -> tuple[str, ...]:
        """`Name(t,-)=(b,t)`: what a small function returns for the kinds of arguments other
        files pass it, where its own summary does not say (`t > 0` of a parameter)."""
        cross = self.cross
        if not cross.hot and not cross.bound:
            return ()
        decoder = cross.decoder = cross.decoder or Decoder(self.classes)
        walker: Walker | None = None
        out = set()
        for func in self.functions:
            key = function_key(func)
            if key is None:
                continue
            shapes = {tensor_shape(f"({s})") for s in cross.hot.get(key, []) + cross.bound.get(key, [])}
            generic = code_of(func.result, func)
            for shape in sorted(shapes - {""}):
                walker = walker or Walker(self, self.module, SUMMARY)
                result = walker._specialized(func, shape_binding(func, shape, decoder))
                code = code_of(result, func) if result is not None else NOTHING
                if informative(code) and code.strip(PLAIN) and code != generic:
                    out.add(f"{key}({shape})={code}")
        return tuple(sorted(out))

    def _inherited_seeds(self) -> None:
        """`UniformSampler.sample` called from another file, defined by its base class
        `ScheduleSampler` in this file (improved-diffusion): the base's method is the one run."""
        for seeds in (self.cross.hot, self.cross.bound):
            for key in [k for k in seeds if "." in k]:
                owner, _, method = key.partition(".")
                cls = self.classes.get(owner)
                if cls is None or method in cls.methods or "." in method:
                    continue
                target = cls.lookup_method(method)
                if target is not None and target.cls is not None and target.cls is not cls:
                    seeds.setdefault(f"{target.cls.name}.{method}", []).extend(seeds[key])

    def _bind_foreign_arguments(self) -> None:
        """What other files pass to this file's functions (every step, or once: a loader,
        an object) binds their parameters, before the summaries: `self.coder = coder`."""
        cross = self.cross
        if not cross.hot and not cross.bound:
            return
        decoder = cross.decoder = cross.decoder or Decoder(self.classes)
        for func in self.functions:
            key = function_key(func)
            if key is None:
                continue
            signatures = cross.hot.get(key, []) + cross.bound.get(key, [])
            if signatures:
                bound = cross.summary_args.setdefault(id(func), {})
                bind_foreign_arguments(func, signatures, decoder, bound)
                if any(value.kind is Kind.LOADER for value in bound.values()):
                    cross.feeding.add(id(func))  # walked for the report: where its loader goes

    def _summaries(self) -> None:
        # Functions called at module level (`main()`, `loader = make_loader()`) are summarized
        # during the module walk, before its environment exists: let them see the module's
        # imports, functions and classes.
        self.module_env = self._module_declarations()
        Walker(self, self.module, SUMMARY).run()
        self.module_env = self.module.summary_env or {}
        for cls in self.classes.values():
            for name in ("__init__", "setup", "build", "_build", "reset_parameters"):
                method = cls.methods.get(name)
                if method is not None:
                    self.ensure_summary(method)
        for func in self.functions:
            self.ensure_summary(func)

    def ensure_summary(self, func: FunctionInfo) -> None:
        if func.summary_state:
            return
        func.summary_state = 1
        try:
            Walker(self, func, SUMMARY).run()
        finally:
            func.summary_state = 2

    def _seed_hot_functions(self) -> None:
        for func in self.functions:
            reason = seed_reason(func, self.hot_functions, self.imports_torch, self.is_test(func),
                                 self.test_file)
            if reason:
                func.hot, func.hot_reason = True, reason
                # its own reason (a `forward`, a loss) is the entry point; else the callers
                # in other files are, and perflint.hot_paths finds them
                own = seed_reason(func, {}, self.imports_torch, self.is_test(func), self.test_file)
                if own:
                    row = getattr(func.node, "lineno", 1)
                    func.hot_chain = ((row, own),)
                else:
                    func.hot_seed = func.display_name
            key = func.name if func.cls is None else f"{func.cls.name}.{func.name}"
            if func.parent is None and (key in self.hot_functions or key in self.cross.bound):
                func.foreign_callers = True

    def _report(self) -> None:
        order = self._caller_first_order()
        self.module.hot = False
        Walker(self, self.module, REPORT).run()
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
        Walker(self, func, REPORT).run()

    def _needs_report_walk(self, func: FunctionInfo) -> bool:
        # ... and a function handed a loader, or handing one to another file's function:
        # where its batches go decides the loader's findings
        return func.hot or func.has_loop or self.cold_rules_enabled or id(func) in self.cross.feeding \
            or any(value.kind is Kind.LOADER for value in func.arg_values.values()) \
            or (bool(self.per_sample_rules) and self.is_per_sample(func))

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


def _annotated(func: FunctionInfo):
    node = func.node
    return annotation_value(node.returns) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


# The names this module had when it held the whole analysis (tests use the private ones).
_Walker = Walker
_join_env = join_env
_EXPR_HANDLERS = EXPR_HANDLERS

__all__ = ["FileAnalysis", "FunctionInfo", "ClassInfo", "annotation_value", "TENSOR_ONLY_METHODS"]
