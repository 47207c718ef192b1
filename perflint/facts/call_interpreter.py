"""Values of calls, the walker's third layer (see `frame`).

Methods of tensors, batches, modules and sequences; calls of the file's own functions and
classes (binding their parameters, noting the call graph); calls by qualified name (torch,
numpy, builtins, other project files); and the step markers (running the model,
`backward()`, `optimizer.step()`, `next(loader_iter)`) that make a loop a step loop.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from functools import reduce

from .calls import external_call_value, may_be_project_function
from .distributions import DISTRIBUTION_WRAPPERS
from .environment import annotation_value, merged_device
from .expressions import EXPR_HANDLERS, ExpressionInterpreter
from .hints import (
    calls_its_own_train,
    constructs_an_object,
    hint_for_name,
    is_module_base,
    is_tokenizer_call,
    names_a_class,
)
from .hot_regions import parameter_defaults
from .hotness import (
    WORKER_HANDOFFS,
    is_loss_function_name,
    is_model_loading_call,
    is_optimizer_step_receiver,
    receiver_name,
)
from .loader_settings import attach as attach_loader_settings
from .project_calls import (
    ASKS_FOR,
    IF_TRAINS,
    INHERITED,
    MOVES_RETURNED,
    PROJECT_CLASS,
    call_signature,
    keywords_key,
    keywords_value,
    tensor_shape,
)
from .records import SUMMARY, ClassInfo, FunctionInfo
from .specializing import device_from_arguments, specializes, specializing_code
from .summaries import (
    CLOSURE,
    Decoder,
    call_lookup,
    function_key,
    instantiate,
    made_elsewhere,
    param_of,
    parameter_of,
    returned_by,
    split_summary,
    vague,
)
from .syntax import walk_nodes
from .torch_api import (
    BATCH_KEEPING_METHODS,
    MODULE_SELF_METHODS,
    MODULE_STATE_CONSTRUCTORS,
    device_of_expr,
    module_method_value,
    ndarray_method_value,
    tensor_method_device,
    tensor_method_value,
    torch_call_device,
)
from .values import (
    DISTRIBUTION,
    FUNC_CHOICE,
    MODULE,
    NDARRAY,
    NONE,
    NORMAL_DISTRIBUTION,
    PYTHON,
    TENSOR,
    UNKNOWN,
    Kind,
    Value,
    element_of,
    instance_choices,
    is_distribution,
    join,
    module_output,
    ref,
    seq_of,
    tuple_of,
)

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

# Methods of a model (defined elsewhere) that run it once: a loop calling them is a step
# loop. (`generate` / `sample` run a whole decoding loop of their own: a loop over prompts
# calling them is not a step loop.)
_MODEL_COMPUTE_METHODS = frozenset(
    """encode decode predict embed infer inference forward_features forward_head
    extract_features denoise""".split()
)

_SPECIALIZE_DEPTH = 2  # a specialized walk may specialize the functions it calls, once
_SPECIALIZE_LINES = 40  # "small": its body walked again costs little


def _distribution(qualname: str, value: Value, args: list[Value], kwargs: dict[str | None, Value]) -> Value:
    """`Categorical(probs)`: where its parameters are. A Normal samples with `torch.normal` on
    tensors only when a parameter is one (numbers make CPU tensors); a wrapper
    (`Independent(Normal(mu, std), 1)`) samples as the distribution it wraps."""
    if qualname.rsplit(".", 1)[-1] in DISTRIBUTION_WRAPPERS and args and is_distribution(args[0]):
        return args[0]
    params = args + list(kwargs.values())
    if value.ref == NORMAL_DISTRIBUTION.ref and not any(p.kind in (Kind.TENSOR, Kind.BATCH) for p in params):
        value = DISTRIBUTION
    return value.with_device(merged_device(params))


# What a Hugging Face tokenizer / processor returns with `return_tensors="pt"`: tensors built
# on the CPU from Python data.
_HOST_BATCH = Value(Kind.BATCH, device="cpu")


class CallInterpreter(ExpressionInterpreter):
    """What calls return, and what they tell about the call graph and the step."""

    updates_marked = 0  # backward passes and optimizer steps seen (`Walker._runs_a_training_step`)

    # ----------------------------------------------------------------- calls
    def ev_Call(self, node: ast.Call) -> Value:
        func = node.func
        if self.hot:
            self.file.cross.runs_hot.add(id(self.func))
        receiver: Value | None = None
        if isinstance(func, ast.Attribute):
            receiver = self.ev(func.value)
            callee = None
            if func.attr == "step":  # `optimizer.step(closure=lambda: ...)`
                for closure in [*node.args[:1], *(k.value for k in node.keywords if k.arg == "closure")]:
                    if isinstance(closure, ast.Lambda):
                        self.step_closures.add(closure)
        else:
            callee = self.ev(func)
        args = [self.ev(a) for a in node.args]
        kwargs = {kw.arg: self.ev(kw.value) for kw in node.keywords}
        if self.mode == SUMMARY and not self.loops:
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called and is_model_loading_call(called, lambda: self.qualname(func)):
                self.func.loads_model = True
        if receiver is not None:
            assert isinstance(func, ast.Attribute)
            result = self._method_call(node, func, receiver, args, kwargs)
        else:
            assert callee is not None
            result = self._call(node, callee, args, kwargs)
        if self.hot and self.reporting and not (isinstance(func, ast.Attribute) and func.attr in WORKER_HANDOFFS):
            for arg in args:  # closures handed to `optimizer.step(closure)` and the like
                if arg.kind is Kind.FUNC:
                    for target in self._functions_of(arg.ref):
                        self.file.note_call(self.func, target, {}, self.mode, True, "called from hot code",
                                            self.hot_origin, node.lineno)
        return result

    def _method_call(self, node: ast.Call, func: ast.Attribute, recv: Value,
                     args: list[Value], kwargs: dict[str | None, Value]) -> Value:
        name = func.attr
        kind = recv.kind
        if kind is Kind.REF:
            return self._qualified_call(f"{recv.ref}.{name}", node, args, kwargs)
        choices = instance_choices(recv)
        if len(choices) > 1:  # `policy.train(...)` of `policy = TD3(...)` or `DDPG(...)`: each class's
            results = [self._method_call(node, func, one, args, kwargs) for one in choices]
            return reduce(join, results)
        if name in ("prepare", "prepare_data_loader") and recv.ref == _ACCELERATOR:
            self._note_accelerate_prepare(node, args)
        if name == "backward" or name == "zero_grad":
            self._mark_step(trains=True, updates=name == "backward")
        elif name == "step" and (kind is Kind.OPTIMIZER or is_optimizer_step_receiver(func.value)):
            self._mark_step(trains=True, updates=True)
        if kind is Kind.TENSOR:
            return self._tensor_method(name, node, recv)
        if kind is Kind.BATCH:
            if name in BATCH_KEEPING_METHODS and (node.args or name != "type"):  # `.type(torch.FloatTensor)`
                device = tensor_method_device(name, node, recv, self.qualname, self.value)
                if name in ("to", "cuda") and device != "cpu" and self.hot and self.reporting:
                    param = param_of(recv.origin)  # a batch of a loader another file passes
                    if param is not None:
                        self.file.cross.moves.add(param)
                    returned = returned_by(recv.origin)  # ... or a function of another file returns
                    if returned is not None:
                        self.file.cross.bound_calls.add(f"{returned[0]}({MOVES_RETURNED}{returned[1]})")
                return recv.with_device(device)
            if name == "items":
                return seq_of(tuple_of((PYTHON, recv)))
            if name == "values":
                return seq_of(recv)
            if name == "keys":
                return seq_of(PYTHON)
            if name in ("get", "pop"):
                return recv
            return self._tensor_method(name, node, Value(Kind.TENSOR, device=recv.device))
        if is_distribution(recv):
            return Value(Kind.TENSOR, device=recv.device)  # `m.sample()`, `m.log_prob(action)`
        if kind in (Kind.MODULE, Kind.OBJECT, Kind.CLASS):
            cls = self.file.classes.get(recv.ref) if recv.ref else None
            if name in ("register_buffer", "register_parameter") and cls is not None:
                self._register_attribute(cls, node, args)
            if cls is not None:
                method = cls.lookup_method(name)
                # `self.loss(...)` in a base class runs the subclasses' `loss` too; a mixin
                # calls what the classes mixing it in define.
                overrides = self.file.overrides(cls, name) if kind is not Kind.CLASS else []
                if self.hot and self.reporting and cls.top_level and isinstance(func.value, ast.Name) \
                        and func.value.id == self.self_name and kind is not Kind.CLASS:
                    # subclasses in other files may override it: theirs runs every step too
                    entry = f"{cls.name}.{name}" + call_signature(node, args, kwargs)
                    self.file.cross.override_calls.add(entry)
                    if method is None and self.func.trains:
                        # defined by a base class in another file (BasicSR's `SRModel` calling
                        # `self.reduce_loss_dict(...)` of its `BaseModel` in its training step):
                        # that one runs. (What a forward calls, the base's forward calls itself:
                        # seeding it would only cost its file a second analysis.)
                        self.file.cross.override_calls.add(INHERITED + entry)
                    self._note_origin(entry, f"{cls.name}.{name}", node)
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
                if name in MODULE_SELF_METHODS:
                    if recv.ref is not None and recv.ref.startswith(PROJECT_CLASS) and calls_its_own_train(name, node):
                        # the class defines its own (TD3's `policy.train(replay_buffer)`: a training step)
                        self._project_method(recv, name, node, args, kwargs)
                    return recv  # `Agent(envs).to(device)` is still the Agent: its methods stay known
                if name == "forward" or name in _MODEL_COMPUTE_METHODS:
                    self._mark_step()  # `model.decode(ys, memory)` runs the model too
                    return self._model_output(module_output(), args)
                known = module_method_value(name)
                if known.kind is not Kind.UNKNOWN:
                    return known
                if recv.ref is not None and recv.ref.startswith(PROJECT_CLASS):  # `model.parse_batch(batch)`
                    summarized = self._project_method(recv, name, node, args, kwargs)
                    if summarized is not None:
                        return summarized
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
        if recv.ref is not None and recv.ref.startswith(PROJECT_CLASS):
            summarized = self._project_method(recv, name, node, args, kwargs)
            if summarized is not None:
                return summarized
            if name in ("to", "cuda", "train", "eval"):
                return recv  # `Generator(h).to(device)` (nn.Module's, or a structure's own `to`): the same class
        if name in ("to", "cuda", "eval", "train", "half", "requires_grad_") \
                and (self._assigns_a_module() or constructs_an_object(func.value)):
            # `net = pickle.load(f)["ema"].to(device)`: the name says a module, so is it;
            # `cri_pix_cls(**opt).to(device)` (BasicSR): an instance of a class moved is a module
            return MODULE
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
        if name in _DIMENSION_METHODS and (name != "size" or (len(node.args) == 1 and not node.keywords)):
            return PYTHON  # `self.priors_cxcy.size(0)`: a tensor's (or an array's) size is an int
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
        if node is not None and is_tokenizer_call(node):
            return _HOST_BATCH
        hint = hint_for_name(name)
        if hint is not None and hint.kind is Kind.MODULE and _MODULE_GETTER.match(name.lower()):
            return MODULE  # `accelerator.unwrap_model(unet)`, `self.get_model()`: the module itself
        if hint is not None and hint.kind is Kind.MODULE:
            self._mark_step()
            return self._model_output(module_output(hint.loss), args or [])
        return UNKNOWN

    def _model_output(self, result: Value, args: list[Value]) -> Value:
        """In a file that never mentions an accelerator, a model given CPU tensors (batches of
        a DataLoader, `torch.from_numpy(...)`) computes on the CPU: a script that trains on
        the CPU waits for no GPU. A model given accelerator tensors (and no host ones)
        computes on the accelerator. So does each tensor of a tuple it returns."""
        if result.kind is Kind.SEQ:
            if result.items is not None:
                return tuple_of(tuple(self._model_output(item, args) for item in result.items))
            if result.elem is not None:
                return replace(result, elem=self._model_output(result.elem, args))
            return result
        if result.kind not in (Kind.TENSOR, Kind.BATCH):
            return result
        tensors = [a for a in args if a.kind in (Kind.TENSOR, Kind.BATCH)]
        if result.device is None and tensors and all(a.on_accel for a in tensors):
            return result.with_device("accel")
        if not self.file.host_only:
            return result
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
        if kind is Kind.UNKNOWN and is_tokenizer_call(node):
            return _HOST_BATCH
        if kind is Kind.UNKNOWN and isinstance(node.func, ast.Name):
            made_by = self.file.cross.results_of.get((id(self.func), node.func.id))
            if made_by is not None:
                self.file.cross.calls.add(made_by)  # what `train = factory(...)` returns is called
        if kind is Kind.REF:
            if FUNC_CHOICE in (callee.ref or ""):  # one of several imported functions
                return reduce(join, [self._qualified_call(one, node, args, kwargs)
                                     for one in (callee.ref or "").split(FUNC_CHOICE)])
            return self._qualified_call(callee.ref or "", node, args, kwargs)
        if kind is Kind.FUNC:
            result: Value | None = None
            for target in self._functions_of(callee.ref):
                value = self._call_local(node, target, args, kwargs, bound=target.is_method)
                result = value if result is None else join(result, value)
            return result if result is not None else UNKNOWN
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
        if kind is Kind.UNKNOWN and callee.ref is not None and callee.ref.startswith(PROJECT_CLASS):
            choices = instance_choices(callee)
            if len(choices) > 1:
                return reduce(join, [self._call(node, one, args, kwargs) for one in choices])
            # `self.matcher(quality)` runs `Matcher.__call__`; `self.block(x)` runs a module's
            # forward, hot in its file anyway: no seed (each seed re-analyzes a file)
            qualname = callee.ref[len(PROJECT_CLASS):]
            if not is_module_base(qualname):
                self._note_project_method(callee, "__call__", node, args, kwargs)
            method = "forward" if is_module_base(qualname) else "__call__"
            summarized = self._project_call(f"{qualname}.{method}", node, args, kwargs)
            return summarized if summarized is not None else UNKNOWN
        if kind is Kind.UNKNOWN and isinstance(node.func, ast.Name) and is_loss_function_name(node.func.id):
            return TENSOR
        return UNKNOWN

    def _project_call(self, qualname: str, node: ast.Call, args: list[Value],
                      kwargs: dict[str | None, Value]) -> Value | None:
        """A call to what may be a function of another project file: noted (the project pass
        answers with its summary), a call passing loaders or objects binds its parameters
        there; what it returns by its summary (None when there is none)."""
        cross = self.file.cross
        # Asking for a summary costs a second analysis of this file once the answer comes: only
        # where the answer can matter: in hot code, around it (`loader = make_loader()` before the
        # loop over it: kept if the function turns out to run hot code), when it is handed a loader
        # (it may move its batches), when the statement names a loader (`train_loader =
        # build_loader(cfg)`: its settings), or in what a function returns, when another file asks
        # for that function's summary ("qualname<Name", see perflint.project.project_seeds).
        self._remember_result(qualname)
        if self._assigns_a_loader() or (_passes_loader(args, kwargs) and not self.file.test_file):
            cross.calls.add(qualname)  # (a test hands a loader of five samples to the training helper)
        elif self.mode != SUMMARY:
            if self.hot:
                cross.calls.add(qualname)
            elif self.loops:  # one call may be a training step: `policy.train(replay_buffer)`
                cross.calls.add(qualname + IF_TRAINS)
            else:
                cross.cold_calls.setdefault(id(self.func), set()).add(qualname)
        elif isinstance(self.stmt, ast.Return) and self.specialized is None:
            key = function_key(self.func)
            if key is not None:
                cross.calls.add(f"{qualname}{ASKS_FOR}{key}")
        if not (self.hot and self.reporting) and (any(map(_binds, args)) or any(map(_binds, kwargs.values()))):
            # a hot call binds as it seeds; objects only to constructors, which keep them
            # (`self.box_coder = box_coder`), and to a function handed a loader: the epoch function
            # uses them, and its flags (`focal_loss = False`), every step (`fit(model, loader, focal_loss)`)
            epoch = _passes_loader(args, kwargs)
            signature = call_signature(node, args, kwargs, True, epoch or qualname.endswith(".__init__"), epoch)
            if signature:
                cross.bound_calls.add(qualname + signature)
        summary = None
        if qualname in cross.shaped:  # what it returns for these kinds of arguments
            summary = cross.imported.get(f"{qualname}({tensor_shape(call_signature(node, args, kwargs))})")
        summary = summary or cross.imported.get(qualname)
        if summary is None:
            return None
        returns, moved, trains = split_summary(summary)
        if trains:  # `policy.train(replay_buffer)`: a loop calling it is a training loop
            self._mark_step(trains=True, updates=True)
        passed = call_lookup(node, args, kwargs)
        for position, name in moved:
            loader = passed(position, name)
            mine = parameter_of(loader, self.func) if loader is not None else None
            key = function_key(self.func) if mine is not None else None
            if mine is not None and key is not None:  # `def fit(loader): return loop.run(loader)`
                cross.moves.add((key, int(mine[0]) if mine[0].isdigit() else -1, mine[1]))
                continue
            origin = loader.origin if loader is not None and loader.kind is Kind.LOADER else None
            if not isinstance(origin, ast.Call):
                continue
            param = param_of(origin)
            returned = returned_by(origin)
            if param is not None:  # a loader passed to this file: moved on its behalf
                cross.moves.add(param)
            elif returned is not None:  # `data = load_data(...)`, handed on: the file that builds it reports
                cross.bound_calls.add(f"{returned[0]}({MOVES_RETURNED}{returned[1]})")
            elif not made_elsewhere(origin):
                cross.feeding.add(id(self.func))
                if self.reporting:
                    found = cross.fed.setdefault(node, [])
                    if origin not in found:
                        found.append(origin)
        if returns.startswith(CLOSURE):  # `train = train_fns.GAN_training_function(...)`
            return ref(f"{qualname}.{returns[len(CLOSURE):]}")
        value = self._decoder().value(returns, passed, returned=(qualname, -1))
        return value if value.kind is not Kind.UNKNOWN or value.ref else None

    def _note_accelerate_prepare(self, node: ast.Call, args: list[Value]) -> None:
        """`accelerator.prepare(model, optimizer, loader)`: accelerate's loader copies every
        batch to the device, so the call feeds the loaders of this file it is handed (their
        settings are reported there; `RuleContext.loaders_fed_by`)."""
        loaders = [a.origin for a in args if a.kind is Kind.LOADER and isinstance(a.origin, ast.Call)
                   and not made_elsewhere(a.origin)]
        if not loaders:
            return
        cross = self.file.cross
        cross.feeding.add(id(self.func))
        if self.reporting:
            found = cross.fed.setdefault(node, [])
            found.extend(origin for origin in loaders if origin not in found)

    def _remember_result(self, qualname: str) -> None:
        """`train = train_fns.GAN_training_function(G, D, ...)`: which call gave the name its
        value, so that calling that name (`train(x, y)`) asks for the call's summary (a
        function it defines, maybe). A name that says what it holds (`model`) is not needed."""
        name = self._assigned_name()
        if name is not None and hint_for_name(name) is None:
            self.file.cross.results_of[(id(self.func), name)] = qualname

    def _assigns_a_module(self) -> bool:
        """`net = ...` (one name, which names a module): what the statement computes is one."""
        name = self._assigned_name()
        hint = hint_for_name(name) if name is not None else None
        return hint is not None and hint.kind is Kind.MODULE

    def _assigned_name(self) -> str | None:
        """`name` in the current statement `name = ...` (one plain name), else None."""
        stmt = self.stmt
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            return stmt.targets[0].id
        return None

    def _assigns_a_loader(self) -> bool:
        """`train_loader, val_loader = build_loaders(cfg)`: the statement names a loader, so
        what the call returns (the loader's settings) matters where it is iterated."""
        stmt = self.stmt
        if not isinstance(stmt, ast.Assign):
            return False
        for target in stmt.targets:
            for name in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if isinstance(name, ast.Name) and (hint_for_name(name.id) or UNKNOWN).kind is Kind.LOADER:
                    return True
        # `data = load_data(data_dir=...)`: a function named for loading data (guided-diffusion)
        call = stmt.value
        return isinstance(call, ast.Call) and bool(_LOADER_FACTORY.match(receiver_name(call.func).lower()))

    def _decoder(self) -> Decoder:
        cross = self.file.cross
        if cross.decoder is None:
            cross.decoder = Decoder(self.file.classes)
        return cross.decoder

    def _project_method(self, instance: Value, method: str, node: ast.Call, args: list[Value],
                        kwargs: dict[str | None, Value]) -> Value | None:
        """`model.parse_batch(batch)` on an instance of a class of another project file: hot
        there when this code is, and what its summary says it returns (None: no summary)."""
        self._note_project_method(instance, method, node, args, kwargs)
        qualname = (instance.ref or "")[len(PROJECT_CLASS):]
        return self._project_call(f"{qualname}.{method}", node, args, kwargs)

    def _note_project_method(self, instance: Value, method: str, node: ast.Call, args: list[Value],
                             kwargs: dict[str | None, Value]) -> None:
        """A method of a class from another project file, called from hot code: hot there."""
        if self.hot and self.reporting and instance.ref is not None:
            name = f"{instance.ref[len(PROJECT_CLASS):]}.{method}"
            self._note_external_call(name + call_signature(node, args, kwargs), name, node)

    def _note_external_call(self, entry: str, name: str, node: ast.AST) -> None:
        """A call from hot code into another project file, and the chain that makes it hot."""
        self.file.external_hot_calls.add(entry)
        self._note_origin(entry, name, node)

    def _note_origin(self, entry: str, name: str, node: ast.AST) -> None:
        """The chain that makes the call `entry` run every step (the first one seen)."""
        if entry not in self.file.external_hot_call_origins:
            steps = self.hot_origin[0] + ((getattr(node, "lineno", 0), f"calls `{name}`"),)
            self.file.external_hot_call_origins[entry] = (steps, self.hot_origin[1])

    def _qualified_call(self, qualname: str, node: ast.Call, args: list[Value],
                        kwargs: dict[str | None, Value]) -> Value:
        if qualname in ("builtins.next", "builtins.iter") and args and args[0].kind is Kind.LOADER:
            if qualname == "builtins.next":
                self._mark_step(trains=True)  # `next(loader_iter)`: a loop over the data
        project = may_be_project_function(qualname)
        if self.hot and self.reporting and project:
            self._note_external_call(qualname + call_signature(node, args, kwargs), qualname.lstrip("."), node)
        value = external_call_value(qualname, node, args, self.qualname)
        if value.kind is Kind.UNKNOWN and project and names_a_class(qualname.rsplit(".", 1)[-1]):
            # `ConfusionMatrix(nc)` from the user's `utils.metrics`: remember the class, so
            # its methods called every step are hot in their own file (the project pass);
            # what its constructor is passed binds its parameters there
            self._project_call(qualname + ".__init__", node, args, kwargs)
            return Value(Kind.UNKNOWN, ref=PROJECT_CLASS + qualname)
        if project:
            summarized = self._project_call(qualname, node, args, kwargs)
            if summarized is not None:
                return summarized
        if qualname.startswith("torch."):
            if value.kind is Kind.TENSOR:
                if qualname.startswith("torch.Tensor.") and args:
                    device = tensor_method_device(qualname.rsplit(".", 1)[1], node, args[0], self.qualname, self.value)
                elif qualname.count(".") == 1:
                    device = torch_call_device(qualname[6:], node, args, self.qualname, self.value)
                elif qualname in MODULE_STATE_CONSTRUCTORS:
                    device = None
                elif value.device is not None:  # `torch.cuda.FloatTensor(...)`
                    device = value.device
                else:
                    device = merged_device(args)
                value = value.with_device(device)
            elif value.kind is Kind.SEQ and value.elem is not None and value.elem.kind is Kind.TENSOR:
                # tuples of tensors (`torch.sort`, `torch.linalg.lstsq`): where the inputs are
                device = merged_device(args)
                value = Value(Kind.SEQ, elem=value.elem.with_device(device))
            elif value.kind is Kind.LOADER:
                attach_loader_settings(node, self.func.node)  # `DataLoader(ds, **kwargs)`
                batch = Value(Kind.BATCH, data=True, device="cpu", origin=node)
                value = Value(Kind.LOADER, elem=batch, origin=node)
            elif value.kind is Kind.DEVICE and node.args:
                value = value.with_device(device_of_expr(node.args[0], self.qualname, self.value))
            elif is_distribution(value):
                value = _distribution(qualname, value, args, kwargs)
        return value

    def _functions_of(self, ref: str | None) -> list[FunctionInfo]:
        """The functions a FUNC value names: a local function, a bound method ("Class.method",
        `_run = self.run`), or either of several ("A.run|A.run_cuda": `_run = self.run_cuda
        if self.cuda_ray else self.run`; `_run(rays)` runs one of them)."""
        found = []
        for name in (ref or "").split(FUNC_CHOICE):
            owner, dot, method = name.rpartition(".")
            cls = self.file.classes.get(owner) if dot else None
            target = cls.lookup_method(method) if cls is not None else self._local_function(name) if not dot else None
            if target is not None:
                found.append(target)
        return found

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
        binding = self._bind(target, node, args, kwargs, bound)
        if self.mode == SUMMARY and not self.silent and self.specialized is None:
            target.local_calls += 1
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                target.opaque_calls = True  # `f(*args, **kwargs)` may pass anything
        if not self.silent and self.hot and self.mode != SUMMARY:
            passed = set(binding)
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                passed |= set(parameter_defaults(target))  # `f(*args, **kwargs)` may pass any
            target.hot_passed = passed | (target.hot_passed or set())
        if not self.silent:
            reason = f"called from hot code in `{self.func.name}`"
            self.file.note_call(self.func, target, binding, self.mode, self.hot, reason, self.hot_origin,
                                getattr(node, "lineno", 0))
        if target.steps and not target.loops_steps and not target.loads_model and not self.file.is_test(target):
            # `self.fit_batch(batch)`, `next_token(model, x)`; `self.run_backward(task, loss)`
            self._mark_step(trains=target.trains, updates=target.trains)
        if target.loops_steps and self.loops:  # `train_one_epoch(...)` in a loop: an epoch loop
            self.loops[-1].nested_data = True
        result = instantiate(target.result, target, lambda _position, name: binding.get(name))
        if vague(result) or device_from_arguments(result, binding):
            result = self._specialized(target, binding) or result
        if result.kind in (Kind.UNKNOWN, Kind.NONE) and isinstance(target.node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotated = annotation_value(target.node.returns)
            if annotated is not None:
                return annotated
        return result

    def _specialized(self, target: FunctionInfo, binding: dict[str, Value]) -> Value | None:
        """What a small function returns for this call's arguments, when its summary does not
        say (`(offsets < r).all(-1).any(0)` of tensors is a mask; of unknowns, unknown): its
        body walked once more per kind of arguments, leaving no trace in the records."""
        node = target.node
        cross = self.file.cross
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or target.has_statement_loop \
                or cross.specializing >= _SPECIALIZE_DEPTH or (node.end_lineno or node.lineno) - node.lineno > _SPECIALIZE_LINES:
            return None
        codes = tuple(sorted((name, specializing_code(value)) for name, value in binding.items()
                             if specializes(value)))
        if not codes:
            return None  # nothing the summary did not know
        key = (id(target), codes)
        if key in cross.specialized:
            return cross.specialized[key]
        if any(isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               for stmt in node.body for inner in walk_nodes(stmt)):
            cross.specialized[key] = None
            return None  # its nested functions belong to the summary's walk
        cross.specialized[key] = None  # recursion: the summary's answer
        shadow = FunctionInfo(target.name, node, cls=target.cls, parent=target.parent, decorators=target.decorators)
        shadow.summary_state = 2
        walker = type(self)(self.file, shadow, SUMMARY)
        # the arguments the key names; the others as the summary has them
        walker.specialized = {name: value for name, value in binding.items() if specializes(value)}
        walker.silent = 1
        cross.specializing += 1
        try:
            walker.run()  # type: ignore[attr-defined]  # `type(self)` is the layer above: a Walker
        finally:
            cross.specializing -= 1
        result = shadow.result
        cross.specialized[key] = result  # type: ignore[assignment]
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
        spread = keywords_key(target)
        if spread is not None:  # `def update(self, **meters)`: the extra keyword arguments
            declared = parameter_defaults(target)
            extras = [value for key, value in kwargs.items() if key is not None and key not in declared]
            if extras or None in kwargs:
                binding[spread] = keywords_value(extras, complete=None not in kwargs)
        return binding

    def _mark_step(self, trains: bool = False, updates: bool = False) -> None:
        """The code being walked runs the model (or, `trains`, runs the backward pass, steps
        the optimizer or takes the next batch; `updates`: the backward pass or the optimizer
        step itself): a training or inference step."""
        if updates:
            self.updates_marked += 1
        if self.loops:
            self.loops[-1].direct_markers = True
            if trains:
                self.loops[-1].train_markers = True
            if updates:
                self.loops[-1].update_markers = True
        else:
            self.func.steps = True  # one call of this function is one step
            if updates:
                self.func.trains = True


# Verbs that make, fetch or change a module rather than run it (`apply_model` and `run_model` do run it).
_MODULE_GETTER = re.compile(r"_*(?:unwrap|wrap|get|build|create|make|load|save|prepare|init|setup|copy|"
                            r"freeze|unfreeze|set|convert|register|export|compile|resolve|configure|"
                            r"select|new|reset|update|fuse|quantize|deepcopy|clone)_")


_LOADER_FACTORY = re.compile(r"^_*(?:load|get|build|make|create|prepare|setup)_\w*(?:data|loader|batches)\w*$")
# Methods whose result is a Python int on whatever has them with these arguments (tensors)
_DIMENSION_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement"})
_ACCELERATOR = PROJECT_CLASS + "accelerate.Accelerator"  # the value of `accelerate.Accelerator(...)`


def _passes_loader(args: list[Value], kwargs: dict[str | None, Value]) -> bool:
    return any(a.kind is Kind.LOADER for a in args) or any(v.kind is Kind.LOADER for v in kwargs.values())


def _binds(value: Value) -> bool:
    """A loader, or what may be an object of a project class: worth binding in a callee."""
    return value.kind is Kind.LOADER or (value.ref is not None and value.kind in (Kind.UNKNOWN, Kind.OBJECT)) \
        or (value.kind is Kind.MODULE and (value.ref or "").startswith(PROJECT_CLASS))  # `model = Net()`


# Calls are expressions: `ExpressionInterpreter.ev` hands them to this layer.
EXPR_HANDLERS[ast.Call] = CallInterpreter.ev_Call  # type: ignore[assignment]  # a subclass's method
