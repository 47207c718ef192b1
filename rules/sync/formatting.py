from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.facts.hints import LOG_LEVEL_METHODS, is_logger_name
from perflint.facts.hotness import receiver_name
from perflint.facts.values import Kind
from perflint.rule import Benchmark, Invalid, Rule, Valid

_FORMATTING_BUILTINS = {
    "builtins.print": "print()",
    "builtins.str": "str()",
    "builtins.repr": "repr()",
    "builtins.format": "format()",
    "builtins.ascii": "ascii()",
}
# Lazy `%`-style logging arguments are only formatted when the record is emitted; DEBUG is
# usually disabled, so those are not reported (an f-string argument is formatted anyway).
_SKIPPED_LEVELS = frozenset({"debug"})


class TensorFormatting(Rule):
    """## What it does
    Checks for formatting a tensor as text in code that runs every step: `print(t)`,
    `str(t)`, `repr(t)`, `format(t)`, f-strings (`f"{t}"`, `f"{t:.3f}"`), `%`-formatting
    (`"%s" % t`, `"..." % (a, t)`), `"{}".format(t)`, logging calls that receive a tensor
    argument (`logging.info("%s", t)`, `logger.warning(...)`, `log.info(...)`), and tqdm's
    `pbar.set_postfix(loss=t)`. Each formatting site is reported once.

    Not reported: printing Python values such as `t.shape` or `t.item()` (the `.item()` is
    `tensor-item`'s finding), messages of `raise` and `assert` (built only on failure), and
    `logger.debug("%s", t)`, whose arguments are formatted only when DEBUG is enabled.

    ## Why is this bad?
    Turning a tensor into text copies its values to host memory (`torch/_tensor_str.py`),
    and a 0-dim tensor in an f-string or `%`-format is read with `item()`. Both are blocking
    copies that wait until the GPU has finished every kernel queued before them: logging a
    loss every step stalls the pipeline every step.

    ## Example
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        print(f"step {step}: loss {loss:.4f}")
    ```

    ## Use instead
    Log every N steps (or accumulate on the device and log the aggregate):
    ```python
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        if step % 100 == 0:
            print(f"step {step}: loss {loss:.4f}")
    ```

    ## References
    - [Performance tuning guide: avoid unnecessary CPU-GPU synchronization](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization) ("print(cuda_tensor)")
    """

    code = "PFL210"
    name = "tensor-formatting"
    message = "formatting a tensor with {how} copies it to the host and waits for the GPU every step"
    invalid = [
        Invalid(
            """
            import logging
            import torch

            logger = logging.getLogger(__name__)

            for x, y in loader:
                loss = criterion(model(x), y)
                print("loss", loss)
                a = str(loss)
                b = repr(loss)
                c = format(loss, ".3f")
                d = f"loss={loss:.4f} acc={loss}"
                e = "loss %.4f" % loss
                f = "%s/%s" % (loss, 3)
                g = "{} {}".format("loss", loss)
                logging.info("loss %s", loss)
                logger.warning("loss %s", loss)
            """,
            count=10,
        ),
        Invalid(
            """
            import torch
            from tqdm import tqdm

            class Trainer:
                def fit(self, loader):
                    pbar = tqdm(loader)
                    for batch in pbar:
                        loss = self.model(batch).mean()
                        loss.backward()
                        pbar.set_postfix(loss=loss)
                        pbar.set_postfix({"loss": loss, "step": 1})
                        self.log.info(f"{loss}")
            """,
            count=3,
        ),
        Invalid(
            """
            import torch

            mloss = torch.zeros(4, device=device)
            for i, (imgs, targets) in enumerate(loader):
                loss, loss_items = model(imgs.to(device), targets.to(device))
                mloss = (mloss * i + loss_items) / (i + 1)
                pbar.set_description(("%10.4g" * 4) % (*mloss,))
            """,
            note="a repeated format string and a tensor unpacked into it: one read per element",
        ),
    ]
    valid = [
        Valid(
            """
            import logging
            import torch

            logger = logging.getLogger(__name__)

            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                print(out.shape, out.dtype, out.device)
                print(loss.item())
                logger.info("shape %s", out.shape)
                logger.debug("loss %s", loss)
                if torch.isnan(loss).any():
                    raise ValueError(f"nan loss {loss}")
                assert loss.numel() == 1, f"bad loss {loss}"
                text = "n=%d" % out.size(0)
                ratio = 7 % loss
            """,
            note="Python values, DEBUG logging, error messages, `int % tensor`",
        ),
        Valid(
            """
            import numpy as np

            for x, y in loader:
                a = np.zeros(3)
                print(a, f"{a}", str(a), "%s" % a)
            """,
            note="numpy",
        ),
        Valid(
            """
            import torch

            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                if step % 50 == 0:
                    print(f"loss {loss}")
            print(f"final loss {loss}")
            """,
            note="every N steps, and once after the loop",
        ),
        Valid(
            """
            import torch

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = torch.nn.Parameter(torch.randn(3))
                    print(f"init {self.w}")

                def extra_repr(self):
                    return f"w={self.w}"
            """,
            note="__init__ and repr methods do not run every step",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            loss = y.mean()
            text = f"loss {loss:.4f}"
            result = loss
        """,
        good="""
            y = torch.tanh(x)
            loss = y.mean()
            result = loss
        """,
        description="format the loss in an f-string every step vs not at all (log every N steps)",
    )

    # ----------------------------------------------------------------- calls
    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        how = _FORMATTING_BUILTINS.get(name or "")
        if how is not None:
            args = node.args if name == "builtins.print" else node.args[:1]
            if any(_formats_tensor(arg, ctx) for arg in args):
                ctx.report(node, how=f"`{how}`")
            return
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        method = func.attr
        if method == "format" and _is_text(func.value, ctx):
            values = list(node.args) + [kw.value for kw in node.keywords if kw.arg is not None]
            if any(_formats_tensor(v, ctx) for v in values):
                ctx.report(node, how="`str.format()`")
        elif method in LOG_LEVEL_METHODS and method not in _SKIPPED_LEVELS and _is_logger(func, name, ctx):
            args = node.args[1:] if method == "log" else node.args
            if method == "log" and node.args and (ctx.qualname(node.args[0]) or "").endswith(".DEBUG"):
                return
            if any(_formats_tensor(arg, ctx) for arg in args):
                ctx.report(node, how=f"`{method}()` logging")
        elif method == "set_postfix":
            values = [kw.value for kw in node.keywords if kw.arg is not None]
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    values.extend(arg.values)
            if any(ctx.is_tensor(v) for v in values):
                ctx.report(node, how="`set_postfix()`")

    # ----------------------------------------------------------------- f-strings and %
    def visit_JoinedStr(self, node: ast.JoinedStr, ctx: RuleContext) -> None:
        if any(isinstance(part, ast.FormattedValue) and ctx.is_tensor(part.value) for part in node.values):
            ctx.report(node, how="an f-string")

    def visit_BinOp(self, node: ast.BinOp, ctx: RuleContext) -> None:
        if not isinstance(node.op, ast.Mod) or not _is_format_string(node.left):
            return
        right = node.right
        if isinstance(right, ast.Tuple):
            values = list(right.elts)
        elif isinstance(right, ast.Dict):
            values = list(right.values)
        else:
            values = [right]
        if any(_formats_tensor(v, ctx) for v in values):
            ctx.report(node, how="`%`")


def _formats_tensor(node: ast.expr, ctx: RuleContext) -> bool:
    if isinstance(node, ast.Starred):
        if ctx.is_tensor(node.value):  # `"%g %g" % (*losses,)`: each element is read
            return True
        value = ctx.value(node.value)  # print(*tensors)
        elem = value.elem
        return value.kind is Kind.SEQ and elem is not None and elem.kind is Kind.TENSOR and not elem.on_cpu
    return ctx.is_tensor(node)


def _is_string_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _is_format_string(node: ast.expr) -> bool:
    """A string literal, or one repeated or joined: `("%10.4g" * 6) % values`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        return _is_format_string(node.left) or (isinstance(node.op, ast.Add) and _is_format_string(node.right))
    return _is_string_literal(node)


def _is_text(node: ast.expr, ctx: RuleContext) -> bool:
    return _is_string_literal(node) or (isinstance(node, ast.Name) and ctx.value(node).kind is Kind.PYTHON)


def _is_logger(func: ast.Attribute, qualname: str | None, ctx: RuleContext) -> bool:
    """`logging.info(...)`, `logger.info(...)`, `self.log.warning(...)`."""
    if qualname is not None:
        return qualname.startswith("logging.") and qualname.count(".") == 1
    return is_logger_name(receiver_name(func.value))
