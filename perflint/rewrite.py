"""libcst helpers for fixes: rewrite the source text of one expression, keeping its
formatting (comments, line breaks, spacing) everywhere the fix does not touch.

libcst is imported lazily (`cst` below loads on first use): importing it costs more than a
warm, fully cached run does otherwise, and only files with a fixable finding need it (a
forked worker imports it when it meets one; measured: no slower cold than importing it
before forking). Rules use `from perflint.rewrite import cst`, not `import libcst`."""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Callable


def _lazy_module(name: str) -> ModuleType:
    """The module `name`, executed on its first attribute access (importlib's LazyLoader).
    It goes into sys.modules so that its own submodules import it, not a second copy."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"No module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


if TYPE_CHECKING:
    import libcst as cst
else:
    cst = _lazy_module("libcst")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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


def code(node: cst.CSTNode, newline: str = "\n") -> str:
    return cst.Module(body=[], default_newline=newline).code_for_node(node)


def _newline_of(text: str) -> str:
    match = _LINE_BREAK.search(text)
    return match.group(0) if match else "\n"


def rewrite_expression(text: str, transform: Callable[[cst.BaseExpression], cst.BaseExpression]) -> str:
    """Apply `transform` to the expression `text`; line breaks the transform copies keep the
    text's own style (`\r\n`, `\r`)."""
    newline = _newline_of(text)
    node, wrapped = parse_expression(text)
    if wrapped:
        node = node.with_changes(lpar=node.lpar[1:], rpar=node.rpar[:-1])
    return code(transform(node), newline)


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
            # the space before the closing bracket (a line break, say) moves after the new one
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                                         whitespace_after_arg=cst.SimpleWhitespace(""))
            args.append(arg.with_changes(whitespace_after_arg=last.whitespace_after_arg))
        elif _one_per_line(call, trailing):
            # one argument per line: the new one goes on its own line, before the bracket
            layout = trailing.whitespace_after
            assert isinstance(layout, cst.ParenthesizedWhitespace)  # `_one_per_line` checked it
            indent = _argument_indent(call)
            args[-1] = last.with_changes(comma=trailing.with_changes(
                whitespace_after=layout.with_changes(last_line=indent)))
            closing = cst.ParenthesizedWhitespace(indent=layout.indent, last_line=layout.last_line)
            args.append(arg.with_changes(comma=cst.Comma(whitespace_after=closing)))
        else:
            # A trailing comma: one argument per line stays one per line, each comment stays
            # on its argument's line, and the closing bracket keeps its indentation.
            after = trailing.whitespace_after
            separator = None
            if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
                if _has_newline(args[-2].comma.whitespace_after):
                    separator = args[-2].comma.whitespace_after
            elif _has_newline(call.whitespace_before_args):
                separator = call.whitespace_before_args
            if separator is not None and _has_newline(after):
                assert isinstance(separator, cst.ParenthesizedWhitespace) and isinstance(after, cst.ParenthesizedWhitespace)
                args[-1] = last.with_changes(comma=trailing.with_changes(
                    whitespace_after=after.with_changes(indent=separator.indent, last_line=separator.last_line)))
                args.append(arg.with_changes(comma=cst.Comma(whitespace_after=_bare(after))))
            else:
                args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(arg.with_changes(comma=trailing))
    else:
        args.append(arg)
    return call.with_changes(args=args)


def _argument_indent(call: cst.Call) -> cst.SimpleWhitespace:
    """The indentation of the arguments of a call written one argument per line."""
    for arg in call.args[:-1]:
        ws = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else None
        if isinstance(ws, cst.ParenthesizedWhitespace):
            return ws.last_line
    ws = call.whitespace_before_args
    return ws.last_line if isinstance(ws, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace("")


def _one_per_line(call: cst.Call, trailing: cst.Comma) -> bool:
    if not isinstance(trailing.whitespace_after, cst.ParenthesizedWhitespace):
        return False
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return True
    return any(isinstance(a.comma, cst.Comma) and isinstance(a.comma.whitespace_after, cst.ParenthesizedWhitespace)
               for a in call.args[:-1])


def _bare(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """The same line break and indentation, without the comment or blank lines around it
    (copying those would duplicate the user's comments)."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return whitespace


def _has_newline(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    """Remove the `name=...` argument, keeping the layout before the closing bracket."""
    args = list(call.args)
    index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == name), None)
    if index is None:
        return call
    removed = args.pop(index)
    if args and index == len(args):
        # The new last argument takes over the removed one's trailing comma (or its absence):
        # that is what sits before the bracket. Its own end-of-line comment stays.
        last, comma = args[-1], removed.comma
        own = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
        if isinstance(comma, cst.Comma) and isinstance(own, cst.ParenthesizedWhitespace) \
                and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            comma = comma.with_changes(whitespace_after=own.with_changes(last_line=comma.whitespace_after.last_line))
        args[-1] = last.with_changes(comma=comma)
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
