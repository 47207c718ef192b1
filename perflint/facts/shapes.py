"""Static shape facts that fixes need to be proven exact.

Most rewrites that remove a data-dependent shape (`x[m] = v` -> `torch.where(m, v, x)`) are
only equivalent when the mask has exactly the shape of the tensor it indexes. That cannot be
known in general, but it can be proven in the most common case: the mask is computed
elementwise from that very tensor and Python scalars (`x > 0`, `torch.isnan(x)`,
`(x != 0) & ~x.isinf()`).
"""

from __future__ import annotations

import ast

_ELEMENTWISE_PREDICATES = frozenset(
    {"isnan", "isinf", "isfinite", "isneginf", "isposinf", "isreal", "signbit", "logical_not",
     "bool", "eq", "ne", "gt", "ge", "lt", "le", "greater", "less", "greater_equal",
     "less_equal", "not_equal"}
)
_BINARY_PREDICATES = frozenset({"eq", "ne", "gt", "ge", "lt", "le", "greater", "less",
                                "greater_equal", "less_equal", "not_equal"})


def same_expression(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a, annotate_fields=False) == ast.dump(b, annotate_fields=False)


def is_scalar_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, bool)) and not isinstance(node.value, str)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return is_scalar_literal(node.operand)
    return False


def _is_simple_reference(node: ast.AST) -> bool:
    """A name or attribute chain: evaluating it twice is harmless."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def is_simple_reference(node: ast.AST) -> bool:
    return _is_simple_reference(node)


def mask_has_shape_of(mask: ast.AST, tensor: ast.AST, resolve) -> bool:
    """Is `mask` an elementwise function of `tensor` and Python scalars only?

    Then `mask.shape == tensor.shape`. `resolve(expr)` gives a qualified name (for
    `torch.isnan(x)`-style calls).
    """
    if not _is_simple_reference(tensor):
        return False
    return _elementwise_of(mask, tensor, resolve)


def _elementwise_of(node: ast.AST, tensor: ast.AST, resolve) -> bool:
    if same_expression(node, tensor):
        return True
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        if isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
            return False
        return (_elementwise_of(left, tensor, resolve) and is_scalar_literal(right)) or (
            is_scalar_literal(left) and _elementwise_of(right, tensor, resolve)
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return _elementwise_of(node.operand, tensor, resolve)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _elementwise_of(node.left, tensor, resolve) and _elementwise_of(node.right, tensor, resolve)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        qual = resolve(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if qual and qual.startswith("torch.") and qual.count(".") == 1:
            name = qual[6:]
            if name in _ELEMENTWISE_PREDICATES and len(node.args) == 1:
                return _elementwise_of(node.args[0], tensor, resolve)
            if name in _BINARY_PREDICATES and len(node.args) == 2:
                return _elementwise_of(node.args[0], tensor, resolve) and is_scalar_literal(node.args[1])
            if name in ("logical_and", "logical_or", "logical_xor") and len(node.args) == 2:
                return all(_elementwise_of(a, tensor, resolve) for a in node.args)
            return False
        if isinstance(func, ast.Attribute) and qual is None:
            if func.attr in _ELEMENTWISE_PREDICATES and not node.args:
                return _elementwise_of(func.value, tensor, resolve)
            if func.attr in _BINARY_PREDICATES and len(node.args) == 1:
                return _elementwise_of(func.value, tensor, resolve) and is_scalar_literal(node.args[0])
    return False


# Methods and torch functions whose result has the shape of their tensor input when every
# other argument is a Python scalar literal (or, for `to`/`type`, any argument).
_SHAPE_KEEPING = frozenset(
    {"clone", "detach", "float", "double", "half", "bfloat16", "int", "long", "bool", "contiguous",
     "abs", "neg", "round", "floor", "ceil", "trunc", "sign", "sigmoid", "tanh", "relu", "exp", "log",
     "sqrt", "rsqrt", "square", "clamp", "clip", "nan_to_num", "isnan", "isinf", "isfinite",
     "logical_not", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"}
)
_ANY_ARGUMENTS = frozenset({"to", "type", "cuda", "cpu"})


def shape_root(node: ast.AST, resolve) -> ast.AST | None:
    """An expression whose shape `node`'s shape is known to equal: `node` itself for a name,
    the tensor it is computed elementwise from (with Python scalars) otherwise; None when the
    shape is not known from the syntax."""
    while True:
        if _is_simple_reference(node):
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
            node = node.operand
        elif isinstance(node, ast.BinOp) and is_scalar_literal(node.right):
            node = node.left
        elif isinstance(node, ast.BinOp) and is_scalar_literal(node.left):
            node = node.right
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and is_scalar_literal(node.comparators[0]) \
                and not isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
            node = node.left
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            qual = resolve(node.func)
            if qual and qual.startswith("torch.") and qual.count(".") == 1 and qual[6:] in _SHAPE_KEEPING:
                if not node.args or isinstance(node.args[0], ast.Starred):
                    return None
                others = node.args[1:] + [kw.value for kw in node.keywords if kw.arg not in ("dtype", "device")]
                if not all(is_scalar_literal(a) for a in others):
                    return None
                node = node.args[0]
            elif qual is None and isinstance(node.func, ast.Attribute) and node.func.attr in _ANY_ARGUMENTS:
                if any(isinstance(a, ast.Starred) for a in node.args) or any(kw.arg is None for kw in node.keywords):
                    return None
                node = node.func.value
            elif qual is None and isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_KEEPING:
                others = node.args + [kw.value for kw in node.keywords if kw.arg not in ("dtype", "device")]
                if not all(is_scalar_literal(a) for a in others):
                    return None
                node = node.func.value
            else:
                return None
        else:
            return None


def same_shape(a: ast.AST, b: ast.AST, resolve) -> bool:
    """Are `a` and `b` known to have the same shape (both computed elementwise, with Python
    scalars, from the same tensor expression)?"""
    root_a, root_b = shape_root(a, resolve), shape_root(b, resolve)
    return root_a is not None and root_b is not None and same_expression(root_a, root_b)
