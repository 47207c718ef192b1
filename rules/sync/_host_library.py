"""Copies to the host whose result a host-only library needs: `linear_sum_assignment(c.cpu())`,
`cv2.imwrite(path, img.cpu().numpy())`, `Image.fromarray(x.cpu().numpy())`, COCO evaluation,
a worker process (`pool.submit(evaluate, y_pred.cpu(), y)`).

The copy is the point there (the library cannot read device memory), so PFL203 leaves these
to an opt-in code of their own (PFL229, `host-library-copy`). Read syntactically from the
copy outwards: the copy (through `.numpy()`, `.detach()`, a dtype cast, `np.asarray`) is an
argument of a host library call, or it is bound to a name (`C = C.view(bs, n, -1).cpu()`) that
the function then only hands to such calls (also through `c[i]`, `C.split(...)` and a
comprehension whose element is the call, as DETR's Hungarian matcher does).
"""

from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.hotness import WORKER_HANDOFFS

# Libraries that read host memory only.
HOST_LIBRARIES = ("scipy.", "sklearn.", "pycocotools.", "PIL.", "cv2.", "numpy.", "matplotlib.",
                  "imageio.", "skimage.", "lap.", "lapjv.", "pandas.", "faiss.", "soundfile.", "librosa.")
# Tensor methods that keep the host copy what it is (a view, a cast, the numpy array).
_PASS_THROUGH = frozenset({"numpy", "detach", "float", "double", "long", "int", "astype", "squeeze",
                           "view", "reshape", "split", "transpose", "permute", "contiguous", "copy",
                           "T", "data", "clone", "flatten", "unbind", "chunk"})
_WRAPPERS = frozenset({"enumerate", "zip", "reversed", "list", "tuple", "iter"})


def _is_host_call(node: ast.AST, ctx: RuleContext) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in WORKER_HANDOFFS:
        return True
    name = ctx.qualname(node.func)
    if name is None:
        return False
    return name.startswith(HOST_LIBRARIES) and not name.startswith(("numpy.ndarray.",))


def _outward(node: ast.AST, ctx: RuleContext) -> ast.AST:
    """From the copy out through what keeps it a host copy: `.numpy()`, `.detach()`,
    `[i]`, casts, `np.asarray(...)` counts as the library."""
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _PASS_THROUGH:
            outer = ctx.parent(parent)
            node = outer if isinstance(outer, ast.Call) and outer.func is parent else parent
            continue
        if isinstance(parent, ast.Subscript) and parent.value is node:
            node = parent
            continue
        if isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Name) \
                and parent.func.id in _WRAPPERS and ctx.qualname(parent.func) in (None, f"builtins.{parent.func.id}"):
            node = parent  # `enumerate(C.split(sizes, -1))`
            continue
        return node


def _feeds_library(node: ast.AST, ctx: RuleContext) -> bool:
    """Is the expression `node` an argument of a host library call (itself or as the
    element of a comprehension whose element is such a call)?"""
    node = _outward(node, ctx)
    parent = ctx.parent(node)
    if isinstance(parent, ast.keyword):
        parent = ctx.parent(parent)
    if isinstance(parent, ast.Call) and node is not parent.func and _is_host_call(parent, ctx):
        return True
    if isinstance(parent, ast.Starred):
        call = ctx.parent(parent)
        return _is_host_call(call, ctx) if call is not None else False
    if isinstance(parent, ast.comprehension) and parent.iter is node:
        comp = ctx.parent(parent)
        element = getattr(comp, "elt", None)
        while isinstance(element, (ast.Subscript, ast.Attribute)):  # `linear_sum_assignment(c)[1]`
            element = element.value
        return element is not None and _is_host_call(element, ctx)
    return False


def feeds_host_library(copy: ast.Call, ctx: RuleContext) -> bool:
    """Does the host copy `copy` exist for a host-only library? In an evaluation or
    inference loop, a NumPy array made from the copy and handed to a function of the
    project (`get_metrics(mix_np, est_np, ...)`, `sf.write(path, est_np)`) counts too: the
    host needs it in this iteration. (Appended to a list, it could be copied once after the
    loop; in a training loop, the copy costs every step.)"""
    if _feeds_library(copy, ctx):
        return True
    return _bound_for(copy, ctx, _feeds_library) or (
        ctx.in_inference_loop and _made_numpy(copy, ctx) and _bound_for(copy, ctx, _handed_to_function))


def _made_numpy(copy: ast.Call, ctx: RuleContext) -> bool:
    """Does the copy end in `.numpy()` (through `.data`, `.detach()`, casts...)?"""
    node: ast.AST = copy
    while True:
        parent = ctx.parent(node)
        if not isinstance(parent, ast.Attribute) or parent.value is not node:
            return False
        if parent.attr == "numpy":
            return True
        if parent.attr not in _PASS_THROUGH:
            return False
        outer = ctx.parent(parent)
        node = outer if isinstance(outer, ast.Call) and outer.func is parent else parent


def _handed_to_function(node: ast.AST, ctx: RuleContext) -> bool:
    """Is `node` an argument of a call of a function (not a method of a local container,
    not `print` or a logger): `get_metrics(x_np, ...)`, `sf.write(path, x_np[0])`, or
    iterated (`for src in x_np:`)?"""
    node = _outward(node, ctx)
    parent = ctx.parent(node)
    if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
        return True  # `for src in sources_np:` iterates the array on the host
    if isinstance(parent, ast.keyword):
        parent = ctx.parent(parent)
    if not isinstance(parent, ast.Call) or node is parent.func:
        return False
    func = parent.func
    if isinstance(func, ast.Name):
        return func.id not in ("print", "str", "repr", "format", "float", "int", "list", "tuple")
    name = ctx.qualname(func)
    return name is not None and not name.startswith(("torch.", "logging.", "wandb.", "builtins."))


def _bound_for(copy: ast.Call, ctx: RuleContext, use_ok) -> bool:
    """Is the copy bound to a name (`x_np = x.cpu().numpy()`) that the function then only
    uses where `use_ok` says (and uses at least once)?"""
    outer = _outward(copy, ctx)
    statement = ctx.parent(outer)
    if not (isinstance(statement, ast.Assign) and statement.value is outer and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return False
    name = statement.targets[0].id
    function = ctx.function_node
    if function is None:
        return False
    end = (statement.end_lineno, statement.end_col_offset)
    uses = sorted((n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name
                   and (n.lineno, n.col_offset) > end), key=lambda n: (n.lineno, n.col_offset))
    read = False
    for use in uses:
        if isinstance(use.ctx, ast.Store):
            break  # rebound (here or in another branch): what follows may be another value
        if not use_ok(use, ctx):
            return False
        read = True
    return read


__all__ = ["HOST_LIBRARIES", "feeds_host_library"]
