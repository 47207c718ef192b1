"""Statements, the walker's top layer (see `frame`): blocks, branches, loops, `try` /
`with` / `match`, definitions, and which of them run every step.

`Walker` is what `analysis.FileAnalysis` runs: once per function for its summary, and again
for the report, when the rules' visitors are called on the nodes they asked for.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any, Callable

from .calls import may_be_project_function
from .dispatch import DispatchInterpreter
from .environment import (
    Env,
    annotation_value,
    cpu_check_subject,
    import_bindings,
    isinstance_value,
    join_env,
    tensor_check_subject,
)
from .framework_hooks import feeds_the_device
from .hot_regions import (
    class_hook_kinds,
    clears_its_flag,
    default_decides,
    fills_a_local_once,
    in_test_or_data_pipeline,
    is_capped_by_counter,
    is_data,
    is_once_test,
    is_step_loop,
    leaves_hot_region,
    parameter_defaults,
    sets_a_stored_sentinel,
    yields_named_batches,
)
from .hotness import (
    eager_truth,
    few_iterations,
    few_while_iterations,
    is_cache_hit_return,
    is_failure_guard,
    is_lazy_init,
    is_micro_batch_loop,
    is_other_device_test,
    loop_counters,
    runs_once,
    steps_the_optimizer,
    terminates,
)
from .throttling import is_throttled_test, skips_unless_throttled
from .records import REPORT, SUMMARY, ClassInfo, FunctionNode, LoopInfo
from .summaries import function_key, made_elsewhere
from .syntax import child_nodes, contains_yield, dotted, pattern_names, walk_nodes
from .torch_api import classify_device
from .values import (
    CHECKED_NDARRAY,
    NONE,
    PYTHON,
    TENSOR,
    UNKNOWN,
    UNKNOWN_MAYBE_PYTHON,
    Kind,
    Value,
    element_of,
    item_of,
    join,
    tuple_of,
)

# What a batch may be made of: narrowing a batch to one of these keeps it a batch.
_CONTAINER_TYPES = frozenset({"list", "tuple", "dict", "builtins.list", "builtins.tuple", "builtins.dict",
                              "collections.abc.Sequence", "collections.abc.Mapping", "Sequence", "Mapping"})


class Walker(DispatchInterpreter):
    """Interprets one function body (or the module body) in one pass."""

    def run(self) -> None:
        func, node = self.func, self.func.node
        # local flags holding a throttled test: `is_log_step = i % n == 0 or last`; `if is_log_step:`
        self.throttled_flags: set[str] = set(self.file.throttling_helpers())
        self.other_device_flags: set[str] = set()  # `mps = "mps" in device.type`
        self.preceding: list[ast.stmt] = []  # the statements before a `while` in its block
        if isinstance(node, ast.Module):
            self.body(node.body)
        else:
            self._bind_parameters(node)
            self.hot = self.mode == REPORT and func.hot
            self.hot_origin = (func.hot_chain, func.hot_seed)
            self.body(node.body)
        if self.mode == SUMMARY:
            self._commit_self_attrs()
            func.summary_env = self.env
        else:
            func.env = self.env

    # ----------------------------------------------------------------- statements
    def body(self, stmts: list[ast.stmt]) -> None:
        hot = self.hot
        for index, stmt in enumerate(stmts):
            handler = STMT_HANDLERS.get(type(stmt))
            previous = self.stmt
            self.stmt = stmt
            self.preceding = stmts[:index] if isinstance(stmt, ast.While) else []
            if handler is None:
                self._stmt_generic(stmt)
            else:
                handler(self, stmt)
            self.stmt = previous
            if self.hot and is_cache_hit_return(stmts, index):
                self.hot = False  # the rest computes a cached value: once per key, not per step
            if terminates([stmt]) is not None:
                break  # after `return` / `raise` / `assert False` / `break`: dead code, never runs
            if self.hot and skips_unless_throttled(stmt, self.throttled_flags, self.file.unit_intervals()) \
                    and not steps_the_optimizer(stmts[index + 1:]) and not self._calls_a_training_step(stmts[index + 1:]):
                # `if step % n: return`: the rest runs every n steps (unless the rest is the
                # training step, gated: drqv2's `if step % self.update_every_steps != 0: return`)
                self.hot = False
        self.hot = hot

    def _stmt_generic(self, stmt: ast.stmt) -> None:
        for child in child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.ev(child)
        self._dispatch(stmt)

    def st_Expr(self, node: ast.Expr) -> None:
        self.ev(node.value)
        self._dispatch(node)

    def st_Assign(self, node: ast.Assign) -> None:
        value = self.ev(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            flag = node.targets[0].id
            if is_throttled_test(node.value, self.throttled_flags, self.file.unit_intervals()):
                self.throttled_flags.add(flag)
            else:
                self.throttled_flags.discard(flag)
            if is_other_device_test(node.value, self.other_device_flags):
                self.other_device_flags.add(flag)
            else:
                self.other_device_flags.discard(flag)
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
            self.returned_loaders(value)
        self._dispatch(node)

    def returned_loaders(self, value: Value) -> None:
        """`return train_ld, test_ld` from a function whose caller in another file moves the
        batches of the first every step: that `DataLoader(...)` call feeds the GPU (its
        settings are reported there, when the report pass walks it)."""
        key = function_key(self.func)
        positions = self.file.cross.returns_moved.get(key) if key is not None else None
        loaders = [value if position < 0 else item_of(value, position) for position in positions or ()]
        func = self.func
        if func.cls is not None and feeds_the_device(func.name, class_hook_kinds(func.cls), func.cls.node):
            # Lightning's `train_dataloader()`: one loader, or a list or dict of them
            loaders += [value] + list(value.items or ()) + ([value.elem] if value.elem is not None else [])
        for loader in loaders:
            origin = loader.origin if loader.kind is Kind.LOADER else None
            if isinstance(origin, ast.Call) and not made_elsewhere(origin):
                self.file.cross.fed.setdefault(origin, [origin])
                self.file.cross.feeding.add(id(self.func))

    def st_If(self, node: ast.If) -> None:
        self.ev(node.test)
        self._dispatch(node)
        hot = self.hot
        # a throttled (or once-only) test, unless it gates the optimizer step (gradient
        # accumulation: `if train_state.acc_step == 0: optimizer.step()`)
        body_hot = hot and not ((is_throttled_test(node.test, self.throttled_flags, self.file.unit_intervals())
                                 or is_once_test(node.test, self.loops, self.value))
                                and not steps_the_optimizer(node.body) and not self._runs_a_training_step(node.body)) \
            and not is_lazy_init(node) \
            and not is_capped_by_counter(node, self.loops, self.func.node) \
            and not clears_its_flag(node, self.loops) \
            and not fills_a_local_once(node, self.loops) and not sets_a_stored_sentinel(node, self.func.node) \
            and not is_failure_guard(node, self._is_tensor) and not is_other_device_test(node.test, self.other_device_flags)
        body_hot = body_hot and not leaves_hot_region(node.body, self.loops, self.func.hot)
        else_hot = hot and not leaves_hot_region(node.orelse, self.loops, self.func.hot)
        # `if torch.jit.is_scripting():` — only one branch runs in eager mode.
        eager = eager_truth(node.test, self.qualname)
        body_hot, else_hot = body_hot and eager is not False, else_hot and eager is not True
        if hot and self.mode == REPORT:  # `if mode == "cpu":` with mode at its default "gpu"
            default = default_decides(node.test, self.func)
            if default is None:
                default = self._passed_tensor_check(node.test)
            body_hot, else_hot = body_hot and default is not False, else_hot and default is not True
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

    def _passed_tensor_check(self, test: ast.expr) -> bool | None:
        """`isinstance(h0, torch.Tensor)` (or `not ...`) on a parameter that every caller
        passes a tensor and that is still one: its value (pytorch_wavelets' `if not
        isinstance(h0, torch.Tensor): h0 = torch.tensor(...)` given registered buffers)."""
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        checked = tensor_check_subject(test.operand if negate else test, self.qualname)  # type: ignore[attr-defined]
        if checked is None:
            return None
        passed = self._passed(checked)
        if passed is None or passed.kind is not Kind.TENSOR or self.lookup(checked).kind is not Kind.TENSOR:
            return None
        return not negate

    def _narrow(self, test: ast.expr) -> None:
        """In `if isinstance(x, np.generic):` x is a numpy value, whatever it was before; in
        `if not isinstance(t, torch.Tensor):` (or `not torch.is_tensor(t)`) t is not a tensor."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            for value in test.values:
                self._narrow(value)
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            checked = tensor_check_subject(test.operand, self.qualname)
            if checked is not None:
                self.env[checked] = UNKNOWN_MAYBE_PYTHON
            return
        if _type_is_not_tensor(test, self.qualname):
            self.env[test.left.args[0].id] = UNKNOWN_MAYBE_PYTHON  # type: ignore[attr-defined]
            return  # `if type(x) is not torch.Tensor: x = torch.tensor([x])`
        checked = tensor_check_subject(test, self.qualname)
        if checked is not None and isinstance(test, ast.Call) and not (
                isinstance(test.func, ast.Name) and test.func.id == "isinstance"):
            self.env[checked] = TENSOR  # `if torch.is_tensor(t):`
            return
        on_cpu = cpu_check_subject(test)
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
        names = [self.qualname(t) or dotted(t) for t in types]
        if self.lookup(test.args[0].id).kind in (Kind.BATCH, Kind.SEQ) and all(
                n in _CONTAINER_TYPES for n in names):
            # `if isinstance(inputs, list):` a batch's parts, `assert isinstance(tensors,
            # (list, tuple))` a list of tensors: still what they were, not host values
            return
        values = [v for v in map(isinstance_value, names) if v is not None]
        if values and len(values) == len(names):
            narrowed = values[0]
            for other in values[1:]:
                narrowed = join(narrowed, other)
            name = test.args[0].id  # type: ignore[union-attr]
            if narrowed.kind is Kind.TENSOR and self.lookup(name).kind is Kind.PYTHON \
                    and name not in parameter_defaults(self.func):
                # `for k, v in kwargs.items(): if isinstance(v, torch.Tensor): v = v.item()` given
                # Python values only (a parameter's may be a guess from its name: `divisor`)
                return
            if narrowed.kind is Kind.NDARRAY and self.lookup(name).kind is not Kind.NDARRAY:
                narrowed = CHECKED_NDARRAY  # `prepare_data(batch)`: any array, the batch's too
            self.env[name] = narrowed

    def _merge_branches(self, branches: list[tuple[list[ast.stmt], Env]], before: Env) -> Env:
        live = [env for stmts, env in branches if terminates(stmts) is None]
        if not live:
            return before
        result = live[0]
        for env in live[1:]:
            result = join_env(result, env)
        return result

    def st_For(self, node: ast.For | ast.AsyncFor) -> None:
        iterable = self.ev(node.iter)
        self._dispatch(node)
        elem = element_of(iterable)
        # ... or the rows of the batch an enclosing loop over the data holds, in a throttled or
        # rare part of its step (`if step % vis_every == 0: for image in batch[:4]:`): no steps
        source = node.iter.args[0] if isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) \
            and node.iter.func.id == "enumerate" and node.iter.args else node.iter
        rows = not self.hot and self.value(source).kind in (Kind.TENSOR, Kind.BATCH) and any(lp.data for lp in self.loops)
        few = few_iterations(node.iter) or runs_once(node.body) or rows
        data = (is_data(iterable, elem) or yields_named_batches(node.target, elem)) and not few
        targets = frozenset(n.id for n in walk_nodes(node.target) if isinstance(n, ast.Name))
        if data and moves_a_target(node.body, targets):
            # `for images, targets in loader: images = images.to(dev)`: a loader whose
            # batches the loop moves itself yields them in host memory; what it leaves
            # there (`targets[0]["labels"]`) is read without a sync (also through
            # `enumerate(loader)`)
            elem = _in_host_memory(elem)
        if elem.kind is Kind.TENSOR and not elem.zero_dim and yields_scalars(node.iter, self.qualname):
            # `for cls in det[:, 5]:` iterating a column (or `unique()` values) yields 0-dim
            # tensors: each `int(cls)`, `names[cls]` reads one to the host
            elem = replace(elem, zero_dim=True)
        self._loop(node, data, lambda: self.assign(node.target, elem), node.body, None,
                   counters=loop_counters(node), few=few, targets=targets)
        self.body(node.orelse)

    def st_While(self, node: ast.While) -> None:
        def test() -> None:
            self.ev(node.test)
            self._dispatch(node)

        self._loop(node, False, test, node.body, node.test,
                   few=few_while_iterations(node, self.preceding) or runs_once(node.body))
        self.body(node.orelse)

    def _loop_description(self, info: LoopInfo) -> str:
        where = "at module level" if self.func.node is self.file.tree else f"in `{self.func.display_name}`"
        if info.data:
            return f"loop over batches {where}"
        # a loop that never runs the backward pass or the optimizer runs the model: inference
        return f"training loop {where}" if info.update_markers else f"loop that runs the model {where}"

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
            marked = self.updates_marked
            if while_test is not None:
                self.ev(while_test)
            else:
                head()
            self.body(body)
            info.updates = self.updates_marked - marked
            self.loops.pop()
            self.silent -= 1
            before = join_env(before, self.env)
        # The pre-walk filled the markers in.
        loop_hot = is_step_loop(info) and not few \
            and not in_test_or_data_pipeline(self.func, self.file.is_test)
        # `while True: ... yield batch` in a generator hot code advances with `next()`
        advanced = self.func.advanced_by_next if not loop_hot and contains_yield(body) else None
        info.root_hot = (loop_hot or advanced is not None) and not hot_before
        self.hot = hot_before or loop_hot or advanced is not None
        origin_before = self.hot_origin
        if info.root_hot and advanced is not None:
            step = (getattr(node, "lineno", 1), "the loop that yields each `next()`")
            self.hot_origin = (advanced[0] + (step,), advanced[1])
        elif info.root_hot:
            self.hot_origin = (((getattr(node, "lineno", 1), self._loop_description(info)),), None)
        self.env = dict(before)
        self.loops.append(info)
        head()
        self.body(body)
        self.loops.pop()
        self.env = join_env(before, self.env)
        self.env.update(info.moved_elements)  # every element moved: whatever the iterations
        self.hot, self.hot_origin = hot_before, origin_before
        if (info.data or info.train_markers or info.direct_markers) and not few and is_micro_batch_loop(node):
            # gradient accumulation over one batch's slices: a call of this function is one
            # step (the loop that calls it is the training loop, not an epoch loop)
            if not self.loops:
                self.func.steps = True
        elif (info.data or info.train_markers) and not few:
            self.func.loops_steps = True  # known now in both passes: the body has been walked
        if self.loops and (info.direct_markers or info.nested_markers):
            self.loops[-1].nested_markers = True
        if self.loops and (info.data or info.nested_data):
            self.loops[-1].nested_data = True

    def _is_tensor(self, node: ast.expr) -> bool:
        return self.value(node).kind is Kind.TENSOR

    def _calls_a_training_step(self, body: list[ast.stmt]) -> bool:
        """Does `body` call a method of this class (`self.update_critic(...)`) or a function of
        this module that runs the backward pass or steps an optimizer? Read from what the
        summary pass learned of them, without walking `body` again."""
        for stmt in body:
            for node in walk_nodes(stmt):
                if isinstance(node, ast.Call):
                    target = self._handler_function(node.func)
                    if target is not None and target.trains:
                        return True
        return False

    def _runs_a_training_step(self, body: list[ast.stmt]) -> bool:
        """Does `body` call what runs the backward pass or steps an optimizer (Rainbow's `if T
        % replay_frequency == 0: dqn.learn(mem)`), and is it the loop's only training step?
        Then a throttle gates the training step itself, which is per-step code; a throttled
        call beside the loop's own step is an evaluation (score_sde's `if step % eval_freq ==
        0: eval_step_fn(state, batch)`). Read by walking it once, silently."""
        if not self.reporting or self.silent:
            return False
        env, marked = self.env, self.updates_marked
        self.env = dict(env)
        self.silent += 1
        try:
            self.body(body)
        finally:
            self.silent -= 1
            self.env = env
        updates = self.updates_marked - marked
        return updates > 0 and (not self.loops or updates >= self.loops[-1].updates)

    def st_Try(self, node: ast.Try) -> None:
        before = self.env
        self.env = dict(before)
        self.body(node.body)
        after_body = self.env
        hot = self.hot
        envs = [(node.body, after_body)]
        for handler in node.handlers:
            self.env = join_env(before, after_body)
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
            for name in pattern_names(case.pattern):
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
        # After `assert isinstance(n, int)` n is a Python number (or a numpy value): what is
        # known of tensors (their device) is kept, a narrowing to a tensor adds nothing.
        before = dict(self.env)
        self._narrow(node.test)
        for name, value in list(self.env.items()):
            if before.get(name) is not value and value.kind not in (Kind.PYTHON, Kind.NDARRAY):
                if name in before:
                    self.env[name] = before[name]
                else:
                    del self.env[name]

    def st_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.env.pop(target.id, None)
            else:
                self.ev(target)
        self._dispatch(node)

    def st_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for name, value in import_bindings(node):
            self.env[name] = value
        self._dispatch(node)

    def st_FunctionDef(self, node: FunctionNode) -> None:
        hot = self.hot
        self.hot = False
        for default in list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]:
            self.ev(default)
        for decorator in node.decorator_list:
            self.ev(decorator)
        self.hot = hot
        info = self.file.info_of.get(node)
        value = Value(Kind.FUNC, ref=node.name) if info is not None else UNKNOWN
        if self.cls_scope is None:
            self.env[node.name] = value
        self._dispatch(node)

    def st_ClassDef(self, node: ast.ClassDef) -> None:
        info = self.file.info_of.get(node)
        assert info is None or isinstance(info, ClassInfo)
        for base in node.bases:
            self.ev(base)
            # once per file: the summary pass walks the module, the report pass again
            top_level = info is not None and info.top_level and self.mode == SUMMARY
            qualname = self.qualname(base) if top_level else None
            if qualname and may_be_project_function(qualname):
                methods = " ".join(sorted(info.methods))  # type: ignore[union-attr]
                self.file.cross.class_bases.add(f"{node.name}<{qualname}:{methods}")
        outer_cls, outer_env, hot = self.cls_scope, self.env, self.hot
        self.cls_scope, self.env, self.hot = info, dict(self.env), False
        self.body(node.body)
        self.cls_scope, self.env, self.hot = outer_cls, outer_env, hot
        self.env[node.name] = Value(Kind.CLASS, ref=node.name) if info is not None else UNKNOWN
        self._dispatch(node)

    def st_Global(self, node: ast.stmt) -> None:
        self._dispatch(node)


STMT_HANDLERS: dict[type, Callable[[Walker, Any], None]] = {
    ast.Expr: Walker.st_Expr,
    ast.Assign: Walker.st_Assign,
    ast.AnnAssign: Walker.st_AnnAssign,
    ast.AugAssign: Walker.st_AugAssign,
    ast.Return: Walker.st_Return,
    ast.If: Walker.st_If,
    ast.For: Walker.st_For,
    ast.AsyncFor: Walker.st_For,
    ast.While: Walker.st_While,
    ast.Try: Walker.st_Try,
    ast.With: Walker.st_With,
    ast.AsyncWith: Walker.st_With,
    ast.Raise: Walker.st_Raise,
    ast.Assert: Walker.st_Assert,
    ast.Delete: Walker.st_Delete,
    ast.Import: Walker.st_Import,
    ast.ImportFrom: Walker.st_Import,
    ast.FunctionDef: Walker.st_FunctionDef,
    ast.AsyncFunctionDef: Walker.st_FunctionDef,
    ast.ClassDef: Walker.st_ClassDef,
    ast.Global: Walker.st_Global,
    ast.Nonlocal: Walker.st_Global,
    ast.Pass: Walker.st_Global,
    ast.Break: Walker.st_Global,
    ast.Continue: Walker.st_Global,
}
if hasattr(ast, "Match"):
    STMT_HANDLERS[ast.Match] = Walker.st_Match
if hasattr(ast, "TryStar"):
    STMT_HANDLERS[ast.TryStar] = Walker.st_Try


_DEVICE_WORDS = ("device", "dev", "cuda", "gpu", "rank")


def _device_like(node: ast.expr) -> bool:
    """An argument of `.to(...)` that names a device (not a dtype)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return classify_device(node.value) == "accel"
    if isinstance(node, ast.Call):  # torch.device("cuda"), accelerator.device
        return _device_like(node.func) or any(_device_like(a) for a in node.args)
    last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return any(word in last.lower() for word in _DEVICE_WORDS)


def _type_is_not_tensor(test: ast.expr, qualname) -> bool:
    """`type(x) is not torch.Tensor` / `type(x) != torch.Tensor`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.IsNot, ast.NotEq))):
        return False
    left = test.left
    if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "type"
            and len(left.args) == 1 and isinstance(left.args[0], ast.Name)):
        return False
    kind = test.comparators[0]
    return isinstance_value(qualname(kind) or dotted(kind)) is TENSOR


def moves_a_target(body: list[ast.stmt], targets: frozenset[str]) -> bool:
    """Does the loop body move (a part of) one of its loop variables to an accelerator:
    `x.cuda()`, `x.to(device)`, `x[0].to(self.device, non_blocking=True)`, or a name
    unpacked from one (`imgs, pids = self.parse_data(data); imgs = imgs.cuda()`)?"""
    targets = targets | _unpacked_from(body, targets)
    for stmt in body:
        for node in walk_nodes(stmt):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            root = node.func.value
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in targets):
                continue
            if node.func.attr == "cuda":
                return True
            if node.func.attr == "to":
                given = [kw.value for kw in node.keywords if kw.arg == "device"] or node.args[:1]
                if given and _device_like(given[0]):
                    return True
    return False


def _unpacked_from(body: list[ast.stmt], targets: frozenset[str]) -> frozenset[str]:
    """Names the loop body's own statements assign from its loop variables (`imgs, pids =
    parse(data)`, `x = batch["image"]`)."""
    names: set[str] = set()
    for stmt in body:
        if not isinstance(stmt, ast.Assign):
            continue
        if any(isinstance(n, ast.Name) and n.id in targets for n in walk_nodes(stmt.value)):
            names.update(n.id for t in stmt.targets for n in walk_nodes(t) if isinstance(n, ast.Name))
    return frozenset(names - targets)


_ONE_DIM_METHODS = frozenset({"unique", "flatten", "ravel", "view", "reshape", "unique_consecutive"})


def yields_scalars(node: ast.expr, qualname) -> bool:
    """Is `node` a tensor expression of one dimension, so iterating it yields 0-dim tensors:
    a column `t[:, k]` (of a 2-D table: detections, boxes), `t.unique()` / `torch.unique(t)`,
    `t.flatten()`, `t.view(-1)` / `t.reshape(-1)`?"""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2:
        first, second = node.slice.elts
        full = isinstance(first, ast.Slice) and first.lower is None and first.upper is None and first.step is None
        return full and isinstance(second, ast.Constant) and type(second.value) is int
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        name = qualname(node.func)
        if name in ("torch.unique", "torch.flatten"):
            return len(node.args) == 1 and not node.keywords
        if name is None and node.func.attr in _ONE_DIM_METHODS:
            if node.func.attr in ("view", "reshape"):
                return len(node.args) == 1 and isinstance(node.args[0], ast.UnaryOp) \
                    and isinstance(node.args[0].operand, ast.Constant) and node.args[0].operand.value == 1
            return not node.args and not node.keywords
    return False


def _in_host_memory(elem: Value) -> Value:
    """A batch of no known device, as a loop that moves parts of it yields it: in host memory
    (inside `enumerate`'s or `zip`'s tuples too)."""
    if elem.kind is Kind.BATCH and elem.device is None:
        return replace(elem, device="cpu")
    if elem.kind is Kind.SEQ and elem.items is not None:
        items = tuple(_in_host_memory(item) for item in elem.items)
        return replace(elem, items=items, elem=tuple_of(items).elem) if items != elem.items else elem
    return elem

