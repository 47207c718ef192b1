"""The bottom layer of the walker: one function body (or the module body) being interpreted.

The walker is built in layers, each in its own module and each a subclass of the one
below: `Frame` (the state of one walk: the environment, parameters, names, `self.<attr>`,
and handing nodes to the rules that asked for them), `expressions.ExpressionInterpreter`
(values of expressions and assignment targets), `call_interpreter.CallInterpreter` (calls),
`dispatch.DispatchInterpreter` (calls that frameworks and hook lists make) and
`walker.Walker` (statements, loops and branches; the one that is run).
"""

from __future__ import annotations

import ast

from .calls import BUILTIN_NAMES
from .environment import Env, annotation_value
from .file_facts import FileFacts
from .hints import hint_for_name
from .project_calls import from_star
from .records import REPORT, SUMMARY, ClassInfo, FunctionInfo, FunctionNode, HotChain, LoopInfo
from .summaries import PROJECT_CLASS, SPREAD, has_markers, instantiate, loader_marker, param_marker
from .torch_api import classify_device, names_a_device
from .values import NONE, PYTHON, TENSOR, TENSOR_DEVICE, UNKNOWN, Kind, Value, join, ref

_CONVENTIONAL_ALIASES = {
    "torch": "torch",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "np": "numpy",
    "numpy": "numpy",
    "pd": "pandas",
}
_SELF_ATTR = "self."


class Frame:
    """The state of one walk over one function body, and what its names hold."""

    def __init__(self, file: FileFacts, func: FunctionInfo, mode: int) -> None:
        self.file = file
        self.func = func
        self.mode = mode
        self.env: Env = {}
        self.silent = 0
        self.hot = False
        # While `hot`: why, as a chain from the entry point, and the seeded function of this
        # file at its root when other files are the entry (see records.FunctionInfo).
        self.hot_origin: tuple[HotChain, str | None] = ((), None)
        # per-sample code of the data pipeline (a report walk): host-copy rules run there too
        self.per_sample = mode == REPORT and bool(file.per_sample_rules) and file.is_per_sample(func)
        self.loops: list[LoopInfo] = []
        self.memo: dict[ast.AST, Value] = {}
        self.stmt: ast.stmt | None = None
        self.cls_scope: ClassInfo | None = None
        self.self_name: str | None = None  # a method's `self` parameter
        # A walk for one call's arguments (see `CallInterpreter._specialized`): what the
        # parameters hold; it leaves no trace in the records.
        self.specialized: dict[str, Value] | None = None
        # Lambdas an optimizer's `step()` is handed as its closure: called every step
        self.step_closures: set[ast.Lambda] = set()
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

    def _bind_parameters(self, node: FunctionNode) -> None:
        args = node.args
        positional = list(args.posonlyargs) + list(args.args)
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        params = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        func = self.func
        # The summary pass gives a parameter nothing else knows about a marker of itself, so
        # that what the function returns is known in terms of what its callers pass.
        markers = self.mode == SUMMARY and self.specialized is None
        skipped = 0
        for index, (arg, default) in enumerate(params):
            if index == 0 and func.cls is not None and arg in positional[:1]:
                if "staticmethod" not in func.decorators:
                    skipped = 1
                    if "classmethod" in func.decorators:
                        self.env[arg.arg] = Value(Kind.CLASS, ref=func.cls.name)
                    elif func.cls.is_autograd_function:
                        self.env[arg.arg] = Value(Kind.OBJECT)
                    else:
                        self.env[arg.arg] = func.cls.instance()
                        self.self_name = arg.arg
                    continue
            value = self._parameter_value(arg, default)
            if markers and (value is UNKNOWN or (value.kind is Kind.LOADER and value.origin is None and not value.ref)):
                position = index - skipped if index < len(positional) else None
                make = param_marker if value is UNKNOWN else loader_marker
                value = make(func, position, arg.arg)
            self.env[arg.arg] = value
        if args.vararg is not None:
            self.env[args.vararg.arg] = Value(Kind.SEQ)
        if args.kwarg is not None:
            self.env[args.kwarg.arg] = self._keywords_value(args.kwarg.arg)

    def _passed_module(self, name: str, passed: Value | None) -> Value | None:
        """`Trainer(model)` given a `NeRFNetwork` by another file: `model` is a module by its
        name, of that class (so `self.model.render(...)` runs `NeRFNetwork.render`)."""
        if passed is None and self.mode == SUMMARY and self.specialized is None:
            passed = self.file.cross.summary_args.get(id(self.func), {}).get(name)
        if passed is None or passed.kind is not Kind.UNKNOWN:
            return None
        return _module_of_class(hint_for_name(name, parameter=True), passed)

    def _keywords_value(self, name: str) -> Value:
        """What `**kwargs` holds: a dict of what the callers pass as extra keywords when that
        is known of every call (`update(loss=loss.item())`: Python values), else a dict of
        unknown contents."""
        if self.mode == REPORT:
            key = SPREAD + name
            passed = self._passed(key)
            if passed is not None and passed.kind is Kind.PYTHON and passed.elem is not None \
                    and not self.func.opaque_calls:
                return passed
        return PYTHON

    def _parameter_value(self, arg: ast.arg, default: ast.expr | None) -> Value:
        annotated = annotation_value(arg.annotation)
        passed = None
        if self.mode == REPORT:
            name = arg.arg
            passed = self._passed(name)
            if passed is None and self._always_default(name, default):
                return NONE if default.value is None else PYTHON  # type: ignore[union-attr]
        elif self.specialized is not None:
            passed = self.specialized.get(arg.arg)
        if passed is not None and passed.kind is Kind.UNKNOWN and (passed.ref or "").startswith(PROJECT_CLASS) \
                and hint_for_name(arg.arg, parameter=True) is None:
            return passed  # an instance of a class of another file: its methods run there
        module = self._passed_module(arg.arg, passed)
        if module is not None:
            return module
        if annotated is not None and annotated.kind is not Kind.NONE:
            # `def f(n: torch.LongTensor)` called only with ints: the callers are right.
            if annotated.kind is Kind.TENSOR and passed is not None and passed.kind is Kind.PYTHON:
                return passed
            # `def log(key, value: float)` called with device tensors: the callers are right too
            if annotated.kind is Kind.PYTHON and passed is not None and passed.kind is Kind.TENSOR \
                    and not passed.on_cpu and _is_number_annotation(arg.annotation):
                return passed
            if passed is not None and passed.kind is annotated.kind:
                return passed  # same kind, and what callers pass knows more (device, origin)
            return annotated
        if passed is not None and passed.kind is not Kind.UNKNOWN:
            return passed
        if isinstance(default, ast.Constant) and default.value is not None:
            where = classify_device(default.value) if isinstance(default.value, str) else None
            if where is not None and passed is None and names_a_device(ast.Name(id=arg.arg)):
                if self.mode != REPORT:
                    # the summary serves every call, and a call may pass another device: unknown
                    return Value(Kind.DEVICE, ref=TENSOR_DEVICE)
                if self._never_passed(arg.arg):
                    return Value(Kind.DEVICE, device=where)  # `device="cpu"` that no call passes
            return PYTHON  # `local_loss=False` is a flag, whatever its name says
        hint = hint_for_name(arg.arg, parameter=True)
        if hint is not None and not (hint.kind is Kind.TENSOR and self.func.name == "__init__"):
            return hint  # (a constructor's `fmax_loss`, `aux_loss` is a setting, not a loss tensor)
        if default is not None:
            if isinstance(default, ast.Constant):
                return NONE
            if isinstance(default, (ast.List, ast.Tuple, ast.Dict, ast.UnaryOp)):
                return PYTHON
        elif arg.annotation is None and self._is_forward_input():
            return TENSOR
        return UNKNOWN

    def _passed(self, name: str) -> Value | None:
        """What the calls pass for parameter `name` (report pass): this file's, else the
        other files'."""
        return self.func.arg_values.get(name) or self.func.summary_arg_values.get(name)

    def _never_passed(self, name: str) -> bool:
        """Every call of this function is in this file, known, and leaves `name` out."""
        func = self.func
        return func.local_calls > 0 and not func.opaque_calls and not func.foreign_callers \
            and name not in func.arg_values and name not in func.summary_arg_values

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
        hint = hint_for_name(name)
        if hint is not None:
            return hint
        stars = self.file.star_modules  # `from nerf.utils import *` ... `Trainer(...)`
        if not stars or name.startswith("__"):
            return UNKNOWN
        return ref(f"{stars[0]}.{name}" if len(stars) == 1 else from_star(stars, name))

    def bind(self, name: str, value: Value) -> None:
        if value.kind is Kind.UNKNOWN:
            hint = hint_for_name(name)
            module = _module_of_class(hint, value)  # `model = load_model(h)`: a module of that class
            if module is not None:
                value = module
            elif hint is not None:
                value = hint
        self.env[name] = value
        if self.cls_scope is not None and self.mode == SUMMARY:
            self._set_attr(self.cls_scope, name, value)

    def _set_attr(self, cls: ClassInfo, name: str, value: Value) -> None:
        if self.specialized is not None:
            return  # a walk for one call's arguments: the class's attributes are the summary's
        if has_markers(value):  # `self.coder = coder`: what other files pass, if they say
            foreign = self.file.cross.summary_args.get(id(self.func), {})
            value = instantiate(value, self.func, lambda _position, param: foreign.get(param))
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
            return f"{base}.{node.attr}" if base and "|" not in base else None  # not of a choice
        return None

    def value(self, node: ast.expr) -> Value:
        """The value computed for `node` in this pass (rules' view)."""
        value = self.memo.get(node)
        if value is not None:
            return value
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        return UNKNOWN

    # ----------------------------------------------------------------- rules
    def _dispatch(self, node: ast.AST) -> None:
        if not self.reporting:
            return
        file = self.file
        # A call that hands a loader of this file to code of another file that moves
        # its batches every step is where this file sees those moves.
        if self.hot or node in file.cross.fed:
            rules = file.dispatch.get(type(node))
        elif self.per_sample:
            rules = file.per_sample_dispatch.get(type(node))
        else:
            rules = file.cold_dispatch.get(type(node))
        if not rules:
            return
        ctx = file.context
        assert ctx is not None
        ctx._walker = self
        for rule in rules:
            ctx._enter(rule, node)
            rule(node, ctx)


def _is_number_annotation(annotation: ast.expr | None) -> bool:
    """`float`, `int`, `bool` (or their quoted names): what a tensor is often passed as."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value in ("float", "int", "bool")
    return isinstance(annotation, ast.Name) and annotation.id in ("float", "int", "bool")


def _module_of_class(hint: Value | None, value: Value) -> Value | None:
    """An instance of a project class held by a name that says module (`model`, `net`): a
    module of that class, whose methods are its own; None otherwise."""
    if hint is not None and hint.kind is Kind.MODULE and (value.ref or "").startswith(PROJECT_CLASS):
        return Value(Kind.MODULE, ref=value.ref)
    return None
