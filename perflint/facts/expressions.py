"""Values of expressions, the walker's second layer (see `frame`): names, attributes,
subscripts, operators, literals, comprehensions, and the targets assignments bind.

Calls are the next layer (`call_interpreter`), which adds its handler to `EXPR_HANDLERS`.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any, Callable

from .environment import merged_device, python_dict
from .file_facts import is_rnn_base
from .frame import Frame
from .hints import hint_for_name
from .hot_regions import is_data
from .hotness import eager_truth
from .records import REPORT, SUMMARY
from .syntax import child_nodes
from .torch_api import TENSOR_METADATA_ATTRS, classify_device, dtype_class_of, tensor_attribute_value
from .values import (
    BATCH,
    DEVICE,
    EMPTY_DICT,
    MODULE,
    NDARRAY,
    NONE,
    PARAM_GROUP,
    PYTHON,
    TENSOR,
    UNKNOWN,
    Kind,
    Value,
    element_of,
    item_of,
    join,
    ref,
    seq_of,
    tuple_of,
)

_DEVICE_STRINGS = frozenset({"cpu", "cuda", "mps", "xpu", "xla", "hpu", "npu"})


class ExpressionInterpreter(Frame):
    """What each expression evaluates to, and what an assignment binds."""

    # ----------------------------------------------------------------- expressions
    def ev(self, node: ast.expr) -> Value:
        handler = EXPR_HANDLERS.get(type(node))
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

    def _ev_generic(self, node: ast.expr) -> Value:
        for child in child_nodes(node):
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
        if attr == "saved_tensors" and kind in (Kind.OBJECT, Kind.UNKNOWN):
            return seq_of(TENSOR)  # an autograd Function's `ctx.saved_tensors`
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
                if method is not None:  # a bound method (`_run = self.run`): "Class.method"
                    return Value(Kind.FUNC, ref=f"{cls.name}.{attr}")
            if kind is Kind.MODULE:
                if attr == "training":
                    return PYTHON
                if attr == "device":
                    return DEVICE
                if attr in ("weight", "bias"):
                    if attr == "bias" and cls is not None and self.file.class_is(cls, is_rnn_base):
                        return PYTHON  # `nn.LSTM(bias=True)` keeps a flag; weights are `bias_ih_l0`
                    return TENSOR
            return _attribute_hint(attr)
        if kind is Kind.SEQ and base.elem is not None and base.elem.kind is Kind.TENSOR:
            # named tuples of tensors: `x.max(1).values`, `torch.linalg.lstsq(a, b).solution`
            return base.elem
        if kind is Kind.NDARRAY:
            return PYTHON if attr in ("shape", "ndim", "size", "dtype") else NDARRAY
        if kind is Kind.OPTIMIZER and attr == "param_groups":
            return seq_of(PARAM_GROUP)
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
            return base if isinstance(node.slice, ast.Slice) else NDARRAY  # a slice keeps the dimensions
        if kind is Kind.MODULE:
            return MODULE
        if kind is Kind.REF:
            return PYTHON  # typing subscripts: Optional[...]
        if kind is Kind.PYTHON and base.elem is not None:
            return base.elem  # a dict literal's values: `op_meta[name]`
        if base is PARAM_GROUP or (kind is Kind.PYTHON and base.ref == PARAM_GROUP.ref):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return seq_of(TENSOR) if node.slice.value == "params" else PYTHON  # `group["lr"]`
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
            return Value(Kind.SEQ, items=())  # known empty: a loop may append to it
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
        if not values:
            return EMPTY_DICT  # known empty: what is stored into it is what its subscripts give
        return python_dict(values)

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
            has_dims = left.has_dims or right.has_dims  # broadcasting keeps every dimension
            return Value(Kind.TENSOR, dtype=dtype, zero_dim=zero_dim, has_dims=has_dims,
                         device=merged_device((left, right)))
        if lk is Kind.NDARRAY or rk is Kind.NDARRAY:
            return NDARRAY
        if lk is Kind.PYTHON and rk is Kind.PYTHON:
            return PYTHON
        if lk is Kind.SEQ and rk is Kind.SEQ and isinstance(op, ast.Add):
            return seq_of(join(left.elem or UNKNOWN, right.elem or UNKNOWN))
        if isinstance(op, ast.Mult) and {lk, rk} == {Kind.SEQ, Kind.PYTHON}:
            seq = left if lk is Kind.SEQ else right  # `[0] * len(names)`: a list of the same elements
            return seq_of(seq.elem or UNKNOWN)
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
        # as `torch._check(cond, lambda: f"{t}")` are only called when the check fails. An
        # optimizer's closure (`optimizer.step(closure=lambda: ...)`) is called every step.
        self.hot = hot and node in self.step_closures
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            self.env[arg.arg] = UNKNOWN
        self.ev(node.body)
        self.env, self.hot = saved, hot
        return PYTHON

    def ev_Starred(self, node: ast.Starred) -> Value:
        return self.ev(node.value)

    def ev_Await(self, node: ast.Await) -> Value:
        return self.ev(node.value)

    def returned_loaders(self, value: Value) -> None:
        """What a function hands back to its callers (returned, or yielded from): the walker
        notes the loaders its callers in other files move."""

    def ev_Yield(self, node: ast.Yield | ast.YieldFrom) -> Value:
        value = self.ev(node.value) if node.value is not None else NONE
        if isinstance(node, ast.YieldFrom):
            if value.kind is Kind.LOADER:  # `load_data()`: a generator over the loader's batches
                if self.mode == SUMMARY:
                    self.func.yields_from = value
                self.returned_loaders(value)
            value = element_of(value)
        if self.mode == SUMMARY:
            y = self.func.yields
            self.func.yields = value if y is None else join(y, value)
        return UNKNOWN

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                       elements: Callable[[], Value]) -> Value:
        saved_env, saved_hot, saved_origin = self.env, self.hot, self.hot_origin
        self.env = dict(saved_env)
        for gen in node.generators:
            iterable = self.ev(gen.iter)
            elem = element_of(iterable)
            if is_data(iterable, elem) and not self.hot:
                self.hot = True
                self.hot_origin = (((node.lineno, "comprehension over batches"),), None)
            self.assign(gen.target, elem)
            for cond in gen.ifs:
                self.ev(cond)
        result = elements()
        self.env, self.hot, self.hot_origin = saved_env, saved_hot, saved_origin
        return result

    def ev_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> Value:
        return self._comprehension(node, lambda: seq_of(self.ev(node.elt)))

    def ev_DictComp(self, node: ast.DictComp) -> Value:
        def elements() -> Value:
            self.ev(node.key)
            value = self.ev(node.value)
            # `{k: v.cuda() for k, v in batch.items()}`: subscripts give the values back
            return python_dict([value]) if value.kind in (Kind.TENSOR, Kind.BATCH) else PYTHON

        return self._comprehension(node, elements)


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
            self._moved_element(target, value)
            self._stored_element(target, value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value)

    def _stored_element(self, target: ast.Subscript, value: Value) -> None:
        """`out[k] = feats.cpu().numpy()` (or `out[name][i] = ...`) into a dict this function
        made: its subscripts give back what was stored, so `out[k].tolist()` is numpy's."""
        depth, node = 0, target  # type: tuple[int, ast.expr]
        while isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                return
            depth, node = depth + 1, node.value
        if not isinstance(node, ast.Name) or node.id not in self.env:
            return
        updated = with_stored_element(self.env[node.id], depth, value)
        if updated is not None:
            self.env[node.id] = updated

    def _moved_element(self, target: ast.Subscript, value: Value) -> None:
        """`xs[i] = xs[i].cuda()` in `for i in range(len(xs)):` (or `batch[k] = v.to(dev)`
        in `for k, v in batch.items():`): every element of the container ends up on the
        accelerator, which the loop records for after it (`Walker._loop`)."""
        if not (self.loops and value.kind in (Kind.TENSOR, Kind.BATCH) and value.on_accel):
            return
        container, key = target.value, target.slice
        if not (isinstance(container, ast.Name) and isinstance(key, ast.Name)):
            return
        if not covers_every_element(self.loops[-1].node, container.id, key.id):
            return
        current = self.lookup(container.id)
        if current.kind is Kind.BATCH:
            moved = current.with_device("accel")
        elif current.kind in (Kind.SEQ, Kind.UNKNOWN) and not current.items:
            moved = replace(current, elem=value) if current.kind is Kind.SEQ else seq_of(value)
        else:
            return
        self.loops[-1].moved_elements[container.id] = moved


def with_stored_element(container: Value, depth: int, value: Value) -> Value | None:
    """`container` after `container[k1]...[k<depth>] = value`, when it is a Python dict whose
    stored values are tracked (None when it is not). Only values known not to be tensors are
    kept: a tensor stored may be a guess (an element unpacked from a module's output), and
    an unknown subscript is already read as a possible tensor."""
    if container.kind is not Kind.PYTHON or (container.elem is None and container.items != ()):
        return None  # a dict of unknown contents stays unknown
    elem: Value | None
    if depth == 1:
        stored = value if value.not_tensor else UNKNOWN
        elem = stored if container.elem is None else join(container.elem, stored)
    else:
        if container.elem is None:
            return None
        elem = with_stored_element(container.elem, depth - 1, value)
        if elem is None:
            return None
    return replace(container, elem=elem)


def covers_every_element(loop: ast.AST, container: str, key: str) -> bool:
    """Does `loop` visit every index (or key) of `container` as `key`: `for i in
    range(len(xs))`, `for k in batch`, `for k in batch.keys()`, `for k, v in batch.items()`?"""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    target, iterable = loop.target, loop.iter
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(iterable, ast.Call) \
            and isinstance(iterable.func, ast.Attribute) and iterable.func.attr == "items" and not iterable.args:
        target, iterable = target.elts[0], iterable.func.value
    elif isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) \
            and iterable.func.attr == "keys" and not iterable.args:
        iterable = iterable.func.value
    elif isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range" \
            and len(iterable.args) == 1 and isinstance(iterable.args[0], ast.Call) \
            and isinstance(iterable.args[0].func, ast.Name) and iterable.args[0].func.id == "len" \
            and len(iterable.args[0].args) == 1:
        iterable = iterable.args[0].args[0]
    return isinstance(target, ast.Name) and target.id == key and isinstance(iterable, ast.Name) \
        and iterable.id == container


def _attribute_hint(attr: str) -> Value:
    """What `obj.<attr>` holds by its name alone: modules, loaders, devices... but never
    "a tensor" (`self.config.auxiliary_loss` is a flag, not a loss)."""
    hint = hint_for_name(attr)
    return hint if hint is not None and hint.kind is not Kind.TENSOR else UNKNOWN


# The handler of each expression type (a table, not `getattr`: `ev` runs for every node).
EXPR_HANDLERS: dict[type, Callable[[ExpressionInterpreter, Any], Value]] = {
    ast.Constant: ExpressionInterpreter.ev_Constant,
    ast.Name: ExpressionInterpreter.ev_Name,
    ast.Attribute: ExpressionInterpreter.ev_Attribute,
    ast.Subscript: ExpressionInterpreter.ev_Subscript,
    ast.Slice: ExpressionInterpreter.ev_Slice,
    ast.Tuple: ExpressionInterpreter.ev_Tuple,
    ast.List: ExpressionInterpreter.ev_List,
    ast.Set: ExpressionInterpreter.ev_Set,
    ast.Dict: ExpressionInterpreter.ev_Dict,
    ast.JoinedStr: ExpressionInterpreter.ev_JoinedStr,
    ast.FormattedValue: ExpressionInterpreter.ev_FormattedValue,
    ast.UnaryOp: ExpressionInterpreter.ev_UnaryOp,
    ast.BinOp: ExpressionInterpreter.ev_BinOp,
    ast.Compare: ExpressionInterpreter.ev_Compare,
    ast.BoolOp: ExpressionInterpreter.ev_BoolOp,
    ast.IfExp: ExpressionInterpreter.ev_IfExp,
    ast.NamedExpr: ExpressionInterpreter.ev_NamedExpr,
    ast.Lambda: ExpressionInterpreter.ev_Lambda,
    ast.Starred: ExpressionInterpreter.ev_Starred,
    ast.Await: ExpressionInterpreter.ev_Await,
    ast.Yield: ExpressionInterpreter.ev_Yield,
    ast.YieldFrom: ExpressionInterpreter.ev_Yield,
    ast.ListComp: ExpressionInterpreter.ev_ListComp,
    ast.SetComp: ExpressionInterpreter.ev_ListComp,
    ast.GeneratorExp: ExpressionInterpreter.ev_ListComp,
    ast.DictComp: ExpressionInterpreter.ev_DictComp,
}
