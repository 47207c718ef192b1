"""libcst helpers for fixes: rewrite the source text of one expression, keeping its
formatting (comments, line breaks, spacing) everywhere the fix does not touch."""

from __future__ import annotations

from typing import Callable

import libcst as cst

_MODULE = cst.Module(body=[])


class RewriteError(Exception):
    pass


def parse_expression(text: str) -> tuple[cst.BaseExpression, bool]:
    """Parse an expression's source; returns (node, wrapped) where `wrapped` means the text
    only parses inside parentheses (a multi-line expression whose brackets are outside it)."""
    try:
        return cst.parse_expression(text), False
    except cst.ParserSyntaxError:
        pass
    try:
        node = cst.parse_expression("(" + text + ")")
    except cst.ParserSyntaxError as exc:
        raise RewriteError(str(exc)) from None
    return node, True


def code(node: cst.CSTNode) -> str:
    return _MODULE.code_for_node(node)


def rewrite_expression(text: str, transform: Callable[[cst.BaseExpression], cst.BaseExpression]) -> str:
    node, wrapped = parse_expression(text)
    if wrapped:
        node = node.with_changes(lpar=node.lpar[1:], rpar=node.rpar[:-1])
        result = transform(node)
        return code(result)
    return code(transform(node))


def add_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """Append `name=value` to a call's arguments, after any existing ones."""
    arg = cst.Arg(
        value=cst.parse_expression(value),
        keyword=cst.Name(name),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if args:
        last = args[-1]
        trailing = last.comma
        if trailing is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(arg)
        else:
            # A trailing comma: the new argument takes the last one's place in the layout
            # (and its comma, before the closing bracket); the last one gets the separator
            # the arguments already use, so one-per-line stays one-per-line.
            if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
                separator = args[-2].comma
            else:
                separator = cst.Comma(whitespace_after=call.whitespace_before_args)
                if not _has_newline(call.whitespace_before_args):
                    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            args[-1] = last.with_changes(comma=separator)
            args.append(arg.with_changes(comma=trailing))
    else:
        args.append(arg)
    return call.with_changes(args=args)


def _has_newline(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    if args and len(args) < len(call.args):
        last = args[-1]
        if call.args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def set_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """Give `name=value`: replace the value of an existing `name=` argument, else append it."""
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            args = list(call.args)
            args[index] = arg.with_changes(value=cst.parse_expression(value))
            return call.with_changes(args=args)
    return add_keyword(call, name, value)


def method_chain(node: cst.BaseExpression, depth: int) -> list[cst.Call]:
    """The calls of `f(...).a(...).b(...)` from the outermost down `depth` receivers.

    `method_chain(expr, 2)` on `f(x).a().b()` gives [`f(x).a().b()`, `f(x).a()`, `f(x)`].
    Raises RewriteError when the expression does not have that shape.
    """
    calls: list[cst.Call] = []
    current = node
    for _ in range(depth + 1):
        if not isinstance(current, cst.Call):
            raise RewriteError("expected a call")
        calls.append(current)
        if len(calls) == depth + 1:
            break
        func = current.func
        if not isinstance(func, cst.Attribute):
            raise RewriteError("expected a method call")
        current = func.value
    return calls
