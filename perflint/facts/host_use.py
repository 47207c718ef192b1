"""Does a value kept on the device reach a host consumer?

A fix that replaces a host read (`m.sum().item()`, `torch.equal(a, b)`, `len(x.unique())`)
with a tensor only removes the sync when nothing reads that tensor to the host afterwards, as
often as the original ran. `if m.sum():`, `int(x.sum())`, `f"{n}"`, `lst[n]`, `not same`
all read it again: the sync moves and is hidden from the rule that found it.

`DeviceFlow.reaches_host(node)` follows the value of `node` upwards through the expression,
then through assignments to names (uses in the same function), containers (`lst.append(v)`,
`d[k] = v`, tuple and list displays), calls of the file's own functions (into their
parameters) and `return`s (to the file's calls of the function), and answers True when it
meets a host consumer: a truth test (`if`/`while`/`assert`/ternary/`not`/`and`/`or`,
comprehension conditions), `int/float/bool/len/range/...`, formatting (f-strings,
`format`, `%`, `print`), `.item()/.tolist()/.numpy()/.cpu()`, an index into a Python
container, membership tests, and calls of anything that is not torch.

Only consumers that run as often as the value is made count: when the value is made inside a
loop, uses after that loop (a read once per epoch) do not. Where the facts stop (an attribute
of `self`, a call from another file) the answer is False.
"""

from __future__ import annotations

import ast
from typing import Callable

from .syntax import child_nodes, walk_nodes
from .torch_api import int_arguments

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_LOOPS = (ast.For, ast.AsyncFor, ast.While) + _COMPREHENSIONS
_CONDITIONS = (ast.If, ast.While, ast.Assert, ast.IfExp)

# Methods that read a tensor to the host.
HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__",
                          "is_nonzero", "equal", "allclose", "__format__", "__str__", "__repr__"})
# Attributes and methods that give no data of the tensor (and container mutations).
_NO_DATA = frozenset({"shape", "dtype", "device", "ndim", "requires_grad", "grad_fn", "is_cuda", "size",
                      "dim", "numel", "nelement", "element_size", "data_ptr", "stride", "is_contiguous",
                      "append", "extend", "insert", "add", "update", "clear", "setdefault", "backward",
                      "register_hook", "retain_grad", "__len__"})
# Builtins that read their argument on the host.
_HOST_BUILTINS = frozenset({"int", "float", "bool", "complex", "len", "range", "str", "repr", "format",
                            "print", "hex", "oct", "chr", "bin", "sorted", "min", "max", "divmod", "hash",
                            "all", "any", "set", "frozenset", "dict"})
# Builtins whose result is (or holds) the argument's data, still on the device.
_PASS_BUILTINS = frozenset({"abs", "round", "sum", "iter", "next", "reversed", "tuple", "list", "enumerate",
                            "zip", "map", "filter"})
# Builtins that look at the object, not its data.
_NO_DATA_BUILTINS = frozenset({"isinstance", "id", "type", "hasattr", "getattr", "setattr", "callable",
                               "issubclass", "vars", "dir"})
# torch functions that read to the host or return a Python value.
_HOST_TORCH = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero", "torch.tensor", "torch.Tensor.item",
                         "torch.Tensor.tolist", "torch.Tensor.numpy", "torch.Tensor.cpu"})
_NO_DATA_TORCH = frozenset({"torch.numel", "torch.is_tensor", "torch._assert_async", "torch.is_floating_point",
                            "torch.is_complex", "torch.Tensor.size", "torch.Tensor.dim"})

_HOST = "host"
_LIMIT = 200  # steps: a bound on the search, far above real code


class DeviceFlow:
    """Per-file answers to "does this value, kept on the device, reach a host consumer?"."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {
            child: outer for outer in walk_nodes(tree) for child in child_nodes(outer)
        }
        self.defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.calls: dict[str, list[ast.Call]] = {}
        for node in walk_nodes(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name is not None:
                    self.calls.setdefault(name, []).append(node)
        self._cache: dict[int, bool] = {}

    # ----------------------------------------------------------------- the question
    def reaches_host(self, node: ast.expr, qualname: Callable[[ast.expr], str | None],
                     maybe_tensor: Callable[[ast.expr], bool]) -> bool:
        """Would the value of `node`, were it a device tensor, be read to the host as often
        as `node` runs? `qualname` resolves names (`T.equal` -> `torch.equal`); `maybe_tensor`
        tells a tensor container (indexing it stays on the device) from a Python one."""
        key = id(node)
        if key not in self._cache:
            self._cache[key] = self._search(node, qualname, maybe_tensor)
        return self._cache[key]

    def _search(self, start: ast.expr, qualname, maybe_tensor) -> bool:
        work: list[tuple[ast.AST, ast.AST]] = [(start, self.region(start))]
        seen: set[tuple[int, int]] = set()
        steps = 0
        while work:
            steps += 1
            if steps > _LIMIT:
                return True  # too far to tell: do not claim the sync is gone
            expr, region = work.pop()
            if (id(expr), id(region)) in seen:
                continue
            seen.add((id(expr), id(region)))
            found = self._step(expr, region, qualname, maybe_tensor)
            if found == _HOST:
                return True
            work.extend(found)
        return False

    # ----------------------------------------------------------------- structure
    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def function_of(self, node: ast.AST) -> ast.AST:
        current = self.parents.get(node)
        while current is not None and not isinstance(current, _FUNCTIONS):
            current = self.parents.get(current)
        return current if current is not None else self.tree

    def region(self, node: ast.AST) -> ast.AST:
        """The code that runs as often as `node`: its innermost loop in its function (a For's
        iterable runs once, outside it), else the function."""
        below, child, current = None, node, self.parents.get(node)
        while current is not None and not isinstance(current, _FUNCTIONS):
            if isinstance(current, (ast.For, ast.AsyncFor)):
                if child is not current.iter:
                    return current
            elif isinstance(current, ast.While):
                return current
            elif isinstance(current, _COMPREHENSIONS):  # a comprehension: its first iterable runs once
                first = current.generators[0] if current.generators else None
                if not (child is first and below is first.iter):
                    return current
            below, child, current = child, current, self.parents.get(current)
        return current if current is not None else self.tree

    def _name_uses(self, name: str, binding: ast.AST, region: ast.AST) -> list[ast.Name]:
        """Loads of `name` that run after `binding`, as often: anywhere in a loop region,
        after the binding in a function region."""
        where = (getattr(binding, "lineno", 0), getattr(binding, "col_offset", 0))
        loop = isinstance(region, _LOOPS)
        uses = []
        for node in walk_nodes(region):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
                if loop or (node.lineno, node.col_offset) > where:
                    uses.append(node)
        return uses

    def _follow_target(self, target: ast.AST, region: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
        """The value is stored in `target`: follow its later reads."""
        if isinstance(target, (ast.Name, ast.arg)):
            name = target.id if isinstance(target, ast.Name) else target.arg
            return [(use, region) for use in self._name_uses(name, target, region)]
        if isinstance(target, (ast.Tuple, ast.List)):
            out = []
            for element in target.elts:
                out.extend(self._follow_target(element.value if isinstance(element, ast.Starred) else element, region))
            return out
        if isinstance(target, ast.Subscript):  # d[k] = v: the container holds it
            base = target.value
            if isinstance(base, ast.Name):
                return [(use, region) for use in self._name_uses(base.id, target, region)]
        return []  # an attribute (`self.x = v`): the facts stop here

    # ----------------------------------------------------------------- one step up
    def _step(self, expr: ast.AST, region: ast.AST, qualname, maybe_tensor):
        p = self.parents.get(expr)
        if p is None:
            return []
        up = [(p, region)]
        if isinstance(p, _CONDITIONS) and p.test is expr:
            return _HOST
        if isinstance(p, ast.comprehension):
            if any(cond is expr for cond in p.ifs):
                return _HOST
            if p.iter is expr:  # iterating: the elements flow to the target
                return self._follow_target(p.target, self.region(p.target))
            return []
        if isinstance(p, (ast.For, ast.AsyncFor)):
            if p.iter is expr:
                return self._follow_target(p.target, p)
            return []
        if isinstance(p, ast.UnaryOp):
            return _HOST if isinstance(p.op, ast.Not) else up
        if isinstance(p, ast.BoolOp):
            return _HOST
        if isinstance(p, ast.Compare):
            if any(isinstance(op, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in p.ops):
                return _HOST
            return up
        if isinstance(p, ast.BinOp):
            if isinstance(p.op, ast.Mod) and isinstance(p.left, (ast.Constant, ast.JoinedStr)) \
                    and isinstance(getattr(p.left, "value", ""), str):
                return _HOST
            return up
        if isinstance(p, (ast.FormattedValue, ast.JoinedStr)):
            return _HOST
        if isinstance(p, ast.Subscript):
            if p.slice is expr or (isinstance(p.slice, ast.Tuple) and expr in p.slice.elts):
                return up if maybe_tensor(p.value) else _HOST
            return up if isinstance(p.ctx, ast.Load) else []
        if isinstance(p, ast.Attribute):
            if p.value is not expr:
                return []
            call = self.parents.get(p)
            if p.attr in HOST_METHODS and isinstance(call, ast.Call) and call.func is p:
                return _HOST
            if p.attr in _NO_DATA:
                return []
            if isinstance(call, ast.Call) and call.func is p:
                return [(call, region)]
            return up
        if isinstance(p, ast.keyword):
            call = self.parents.get(p)
            return self._argument(call, expr, None, p.arg, region, qualname, maybe_tensor) \
                if isinstance(call, ast.Call) else []
        if isinstance(p, ast.Starred):
            return up
        if isinstance(p, ast.Call):
            if p.func is expr:
                return []
            index = p.args.index(expr) if expr in p.args else None
            return self._argument(p, expr, index, None, region, qualname, maybe_tensor)
        if isinstance(p, (ast.Assign, ast.AnnAssign)):
            if p.value is not expr:
                return []
            targets = p.targets if isinstance(p, ast.Assign) else [p.target]
            out = []
            for target in targets:
                out.extend(self._follow_target(target, region))
            return out
        if isinstance(p, ast.AugAssign):
            return self._follow_target(p.target, region) if p.value is expr else []
        if isinstance(p, ast.NamedExpr):
            return up + self._follow_target(p.target, region)
        if isinstance(p, (ast.Tuple, ast.List, ast.Set)):
            outer = self.parents.get(p)
            if isinstance(outer, ast.Assign) and outer.value is p and len(outer.targets) == 1 \
                    and isinstance(outer.targets[0], (ast.Tuple, ast.List)) \
                    and len(outer.targets[0].elts) == len(p.elts) \
                    and not any(isinstance(e, ast.Starred) for e in p.elts + outer.targets[0].elts):
                return self._follow_target(outer.targets[0].elts[p.elts.index(expr)], region)  # type: ignore[arg-type]
            return up
        if isinstance(p, ast.Dict):
            return up if any(v is expr for v in p.values) else _HOST  # a key is hashed
        if isinstance(p, (ast.IfExp, ast.Await, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            if isinstance(p, ast.DictComp) and p.key is expr:
                return _HOST
            return up
        if isinstance(p, ast.Lambda):  # `(lambda s: ...)(v)`: the call's value
            call = self.parents.get(p)
            return [(call, region)] if isinstance(call, ast.Call) and call.func is p else []
        if isinstance(p, (ast.Return, ast.Yield, ast.YieldFrom)):
            return self._callers(expr)
        return []

    def _argument(self, call: ast.Call, expr: ast.AST, index: int | None, keyword: str | None,
                  region: ast.AST, qualname, maybe_tensor):
        func = call.func
        name = qualname(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if name is not None and name.startswith("builtins."):
            short = name[9:]
            if short in _NO_DATA_BUILTINS:
                return []
            if short in _PASS_BUILTINS:
                return [(call, region)]
            return _HOST
        if name is None and isinstance(func, ast.Name) and func.id in _HOST_BUILTINS | _PASS_BUILTINS | _NO_DATA_BUILTINS:
            # an unresolved builtin
            return self._argument_builtin(func.id, call, region)
        if _read_as_host_number(expr, name, call):  # `torch.ones(n)`, `x.view(n, -1)`: a size
            return _HOST
        if name in ("torch.tensor", "torch.as_tensor") and index == 0 and not isinstance(expr, (ast.List, ast.Tuple)):
            return [(call, region)]  # a copy of a tensor on its own device; a list of them is read
        if name is not None and (name == "torch" or name.startswith("torch.")):
            if name in _HOST_TORCH:
                return _HOST
            if name in _NO_DATA_TORCH:
                return []
            return [(call, region)]
        if isinstance(func, ast.Attribute) and name is None:
            if func.attr in HOST_METHODS:
                return _HOST
            if func.attr in ("append", "extend", "insert", "add", "appendleft"):
                return self._follow_target(func.value, region) if isinstance(func.value, ast.Name) else []
            if maybe_tensor(func.value):  # `t.add(v)`, `t.masked_fill(m, v)`: still a tensor
                return [(call, region)]
        # The file's own function: follow the argument into its parameter.
        local = self._local_def(func)
        if local is not None:
            param = _parameter(local, index, keyword, bound=isinstance(func, ast.Attribute))
            if param is None:
                return _HOST
            return self._follow_target(param, local)
        if maybe_tensor(call):  # a model or a loss: torch code takes the tensor
            return [(call, region)]
        return _HOST  # anything else that is not torch may read it

    def _argument_builtin(self, short: str, call: ast.Call, region: ast.AST):
        if short in _NO_DATA_BUILTINS:
            return []
        if short in _PASS_BUILTINS:
            return [(call, region)]
        return _HOST

    def _local_def(self, func: ast.expr):
        if isinstance(func, ast.Name):
            defs = self.defs.get(func.id, [])
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            defs = self.defs.get(func.attr, [])
        else:
            return None
        return defs[0] if len(defs) == 1 else None

    def _callers(self, expr: ast.AST):
        """A returned value flows to the file's calls of the function."""
        func = self.function_of(expr)
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        if len(self.defs.get(func.name, [])) != 1:
            return []
        return [(call, self.region(call)) for call in self.calls.get(func.name, [])
                if isinstance(call.func, ast.Name) or (isinstance(call.func, ast.Attribute)
                                                      and isinstance(call.func.value, ast.Name)
                                                      and call.func.value.id == "self")]


def _read_as_host_number(expr: ast.AST, name: str | None, call: ast.Call) -> bool:
    func = call.func
    method = func.attr if name is None and isinstance(func, ast.Attribute) else None
    found = int_arguments(name, method, call)
    if not found:
        return False
    parts = expr.elts if isinstance(expr, (ast.Tuple, ast.List)) else [expr]
    return any(part is node for part in parts for node in found)


def _parameter(func: ast.FunctionDef | ast.AsyncFunctionDef, index: int | None, keyword: str | None,
               bound: bool) -> ast.arg | None:
    params = func.args.posonlyargs + func.args.args
    if bound and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    if keyword is not None:
        for arg in params + func.args.kwonlyargs:
            if arg.arg == keyword:
                return arg
        return None
    if index is not None and index < len(params):
        return params[index]
    return None
