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
