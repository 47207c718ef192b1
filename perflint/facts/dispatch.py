"""Calls whose callee is found by convention, the walker's fourth layer (see `frame`).

Training frameworks call user code that no call in the file names:

- hooks called through a list or by name in hot code: `for h in self._hooks: h.after_step()`
  (detectron2's `TrainerBase`), `getattr(hook, fn_name)(self, **kwargs)` (mmengine's
  `Runner.call_hook`): the methods of that name of the file's hook and callback classes
  (see `hot_regions.class_hook_kinds`) run every step, with what the call passes;
- handlers registered with an ignite `Engine`: `Engine(train_step)` runs `train_step` every
  iteration, and so does `engine.add_event_handler(Events.ITERATION_COMPLETED, log)`;
- module hooks: `module.register_forward_hook(self.forward_hook)` runs the hook on every
  forward of that module (a backward hook, on every backward);
- a generator advanced with `next()` in hot code: `batches = cycle(seq_len)` before the loop,
  `x, y = next(batches)` in it runs the generator's body up to its next `yield`;
- a method of an object held in an attribute named after its class, in another project file:
  `runner.message_hub.update_scalar(...)` calls `MessageHub.update_scalar`, found by the
  project pass in a module named `message_hub` (see `project_calls.by_attribute_name`).
"""

from __future__ import annotations

import ast

from .call_interpreter import TENSOR_ONLY_METHODS, CallInterpreter
from .framework_hooks import EVERY_STEP_HOOK_METHODS, IGNITE_ENGINES, every_iteration_handler
from .hot_regions import class_hook_kinds
from .project_calls import by_attribute_name, call_signature
from .records import SUMMARY, FunctionInfo
from .syntax import assigned_values, dotted
from .torch_api import DTYPE_PRESERVING_METHODS, TENSOR_PYTHON_METHODS, TENSOR_SEQ_METHODS
from .values import Kind, Value


# Methods of tensors, containers and strings: the object is not an instance of a project class.
_NOT_GUESSED = TENSOR_ONLY_METHODS | TENSOR_PYTHON_METHODS | TENSOR_SEQ_METHODS | DTYPE_PRESERVING_METHODS \
    | frozenset("""items keys values get pop append extend insert setdefault copy clear index count
    format join split strip replace startswith endswith""".split())


# What a module runs on every forward or backward pass.
_MODULE_HOOKS = frozenset({"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
                           "register_full_backward_pre_hook", "register_backward_hook"})


class DispatchInterpreter(CallInterpreter):
    """Calls that frameworks and hook lists make."""

    def _method_call(self, node: ast.Call, func: ast.Attribute, recv: Value,
                     args: list[Value], kwargs: dict[str | None, Value]) -> Value:
        if self.mode == SUMMARY:
            handler = every_iteration_handler(node)
            if handler is not None:
                self._register(handler, "ignite handler `{}` runs every iteration")
            elif func.attr in _MODULE_HOOKS and node.args:  # `module.register_forward_hook(self.hook)`
                self._register(node.args[0], "`{}` is a module hook: it runs every forward (or backward)")
        if recv.kind is not Kind.UNKNOWN or recv.ref is not None:
            return super()._method_call(node, func, recv, args, kwargs)
        if self._loop_element(func.value):
            self._call_hooks(node, frozenset({func.attr}), args, kwargs)
        if self.hot and self.reporting:
            guess = by_attribute_name(func.value, func.attr)
            if guess is not None and func.attr not in _NOT_GUESSED:
                entry, name = guess
                self._note_external_call(entry + call_signature(node, args, kwargs), name, node)
        return super()._method_call(node, func, recv, args, kwargs)

    def _qualified_call(self, qualname: str, node: ast.Call, args: list[Value],
                        kwargs: dict[str | None, Value]) -> Value:
        if self.mode == SUMMARY and qualname in IGNITE_ENGINES and node.args:
            self._register(node.args[0], "ignite `Engine` runs `{}` every iteration")  # Engine(train_step)
        if qualname == "builtins.next" and self.hot and not self.silent and self.mode != SUMMARY and node.args:
            generator = self._generator_of(node.args[0])
            if generator is not None and generator.advanced_by_next is None:
                step = (node.lineno, f"advances `{generator.display_name}` with `next()`")
                generator.advanced_by_next = (self.hot_origin[0] + (step,), self.hot_origin[1])
        return super()._qualified_call(qualname, node, args, kwargs)

    def _generator_of(self, name: ast.expr) -> FunctionInfo | None:
        """The generator function of this file whose generator `name` holds: bound in this
        function (or at module level) by `name = gen(...)`, with no other binding."""
        if not isinstance(name, ast.Name):
            return None
        bound = assigned_values(self.func.node, name.id)
        if len(bound) != 1 or not isinstance(bound[0], ast.Call) or not isinstance(bound[0].func, ast.Name):
            return None
        target = self._local_function(bound[0].func.id)
        return target if target is not None and (target.yields is not None or target.yields_from is not None) else None

    def _call(self, node: ast.Call, callee: Value, args: list[Value], kwargs: dict[str | None, Value]) -> Value:
        if isinstance(node.func, ast.Call):
            getter = node.func  # `getattr(hook, fn_name)(self, **kwargs)`
            if dotted(getter.func) == "getattr" and len(getter.args) >= 2 and self._loop_element(getter.args[0]):
                name = getter.args[1]
                names = frozenset({name.value}) if isinstance(name, ast.Constant) and isinstance(name.value, str) \
                    else EVERY_STEP_HOOK_METHODS
                self._call_hooks(node, names, args, kwargs)
        return super()._call(node, callee, args, kwargs)

    # ----------------------------------------------------------------- hook lists
    def _loop_element(self, node: ast.expr) -> bool:
        """`h` in `for h in self._hooks:`: one of a collection's elements."""
        return isinstance(node, ast.Name) and any(node.id in loop.targets for loop in self.loops)

    def _call_hooks(self, node: ast.Call, names: frozenset[str], args: list[Value],
                    kwargs: dict[str | None, Value]) -> None:
        """A call of methods `names` on hooks this code does not know calls the methods of
        those names of the hook and callback classes of this file (not of every class that
        has one): a call like any other, so in hot code they run every step."""
        if self.silent:
            return
        reason = f"called every step through the hooks in `{self.func.display_name}`"
        for cls in self.file.classes.values():
            targets = [cls.methods[n] for n in names if n in cls.methods]
            if not targets or not class_hook_kinds(cls):
                continue
            for target in targets:
                binding = self._bind(target, node, args, kwargs, bound=True)
                self.file.note_call(self.func, target, binding, self.mode, self.hot, reason, self.hot_origin,
                                    node.lineno)

    # ----------------------------------------------------------------- registrations
    def _register(self, handler: ast.expr, reason: str) -> None:
        """A framework calls `handler` every iteration: it is an entry point."""
        target = self._handler_function(handler)
        if target is not None and not target.registered_hot:
            target.registered_hot = reason.format(target.display_name)

    def _handler_function(self, handler: ast.expr) -> FunctionInfo | None:
        """The function of this file that `handler` names: `log_step`, `self.log_step`, or the
        `__call__` of `LogHandler()`."""
        if isinstance(handler, ast.Name):
            return self._local_function(handler.id)
        if isinstance(handler, ast.Attribute) and isinstance(handler.value, ast.Name) \
                and handler.value.id == self.self_name and self.func.cls is not None:
            return self.func.cls.lookup_method(handler.attr)
        if isinstance(handler, ast.Call) and isinstance(handler.func, ast.Name):
            cls = self.file.classes.get(handler.func.id)
            return cls.lookup_method("__call__") if cls is not None else None
        return None
