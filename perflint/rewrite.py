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
            # keep the user's trailing-comma layout: put the new argument before it
            args[-1] = last.with_changes(comma=trailing)
            args.append(arg.with_changes(comma=cst.Comma()))
    else:
        args.append(arg)
    return call.with_changes(args=args)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    if args and len(args) < len(call.args):
        last = args[-1]
        if call.args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)
