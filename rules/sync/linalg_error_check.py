from __future__ import annotations

import ast

from perflint.facts.context import RuleContext
from perflint.rule import Benchmark, Invalid, Rule, Valid
from perflint.types import Applicability, FixAvailability

from ._support import argument, argument_text, device_input, device_tensor, opaque_arguments, torch_prefix

# Functions with an `_ex` variant: name -> (the result's fields, how to take them from `_ex`).
_WITH_EX = {
    "inv": ("inverse",),
    "cholesky": ("L",),
    "solve": ("result",),
    "lu_factor": ("LU", "pivots"),
    "ldl_factor": ("LD", "pivots"),
}
# Functions that check for errors on the host and have no `_ex` variant.
# `svd` runs the same `_linalg_svd` kernel, and its status check, as `svdvals` (whose docs
# say it synchronizes).
_WITHOUT_EX = frozenset("eig eigvals eigh eigvalsh svd svdvals matrix_rank pinv cond".split())
_ALIASES = {"torch.inverse": "inv", "torch.pinverse": "pinv", "torch.cholesky": "cholesky_old", "torch.svd": "svd"}
_METHODS = {"inverse": "inv", "pinverse": "pinv"}


class LinalgErrorCheck(Rule):
    """## What it does
    Checks for linear-algebra calls that check their result for errors on the host, in code
    that runs every step: `torch.linalg.inv`, `cholesky`, `solve`, `lu_factor`, `ldl_factor`,
    `torch.inverse` and `Tensor.inverse()` (which have an `_ex` variant), and
    `torch.linalg.eig`, `eigvals`, `eigh`, `eigvalsh`, `svd` (`torch.svd`), `svdvals`,
    `matrix_rank`, `pinv` (`torch.pinverse`), `cond` (which do not).

    ## Why is this bad?
    These functions raise an error when the input is singular or not positive-definite. To
    know whether to raise, they copy the LAPACK / cuSOLVER `info` status to the host, which
    waits for every queued kernel. The PyTorch docs say: "When inputs are on a CUDA device,
    this function synchronizes that device with the CPU." The `_ex` variants return `info`
    as a tensor instead and never sync.

    ## Example
    ```python
    for x, y in loader:
        cov = model(x)
        precision = torch.linalg.inv(cov)
    ```

    ## Use instead
    ```python
    for x, y in loader:
        cov = model(x)
        precision, info = torch.linalg.inv_ex(cov)
        torch._assert_async((info == 0).all())  # optional: a device-side check
    ```

    ## Fix safety
    The fix calls the `_ex` variant with the same arguments and takes the same result:
    `inv_ex(A).inverse`, `cholesky_ex(A).L`, `solve_ex(A, B).result`; `lu_factor_ex(A)[:2]`
    and `ldl_factor_ex(A)[:2]` only where the result is unpacked (`LU, piv = ...`), or the
    field read right after the call (`.LU`, `.pivots`, `.LD`, `[0]`). On valid inputs the
    values and gradients are the same. It is unsafe because a singular or
    non-positive-definite input no longer raises: the result holds inf / NaN and `info` is
    non-zero. No fix is offered where raising is the purpose: an error-checking branch
    (`if check_errors:`, `if validate_args:`, `if strict:`), a `try` whose handler catches the
    error (`LinAlgError`, `RuntimeError`, `Exception`), a `pytest.raises` block, a
    `check_*`/`validate_*` function; nor with `out=` or `**kwargs`.

    ## References
    - [torch.linalg](https://pytorch.org/docs/stable/linalg.html): "When inputs are on a CUDA device, this function synchronizes that device with the CPU. For a version of this function that does not synchronize, see …_ex".
    """

    code = "PFL222"
    name = "linalg-error-check"
    message = "`{call}` checks for errors on the host and waits for the GPU every step{hint}"
    triggers = (b"linalg", b"inverse", b"cholesky")
    fix_availability = FixAvailability.SOMETIMES
    invalid = [
        Invalid(
            """
            import torch

            for x, y in loader:
                cov = model(x)
                a = torch.linalg.inv(cov)
                b = torch.linalg.cholesky(cov, upper=True)
                c = torch.linalg.solve(cov, y, left=False)
                lu, piv = torch.linalg.lu_factor(cov)
                d = torch.inverse(cov)
                e = cov.inverse()
                f = torch.linalg.lu_factor(cov).pivots
                g = torch.linalg.inv(cov, out=a)
            """,
            count=8,
            fixed="""
            import torch

            for x, y in loader:
                cov = model(x)
                a = torch.linalg.inv_ex(cov).inverse
                b = torch.linalg.cholesky_ex(cov, upper=True).L
                c = torch.linalg.solve_ex(cov, y, left=False).result
                lu, piv = torch.linalg.lu_factor_ex(cov)[:2]
                d = torch.linalg.inv_ex(cov).inverse
                e = torch.linalg.inv_ex(cov).inverse
                f = torch.linalg.lu_factor_ex(cov).pivots
                g = torch.linalg.inv(cov, out=a)
            """,
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import torch as T
            import torch.linalg as LA
            from torch.linalg import inv, eigh

            class Whiten(T.nn.Module):
                def forward(self, x):
                    cov = x.T @ x
                    vals, vecs = eigh(cov)
                    p = LA.pinv(cov)
                    r = T.linalg.matrix_rank(cov)
                    return inv(cov) @ LA.ldl_factor(cov)[0] + T.Tensor.inverse(cov)
            """,
            count=6,
            fixed="""
            import torch as T
            import torch.linalg as LA
            from torch.linalg import inv, eigh

            class Whiten(T.nn.Module):
                def forward(self, x):
                    cov = x.T @ x
                    vals, vecs = eigh(cov)
                    p = LA.pinv(cov)
                    r = T.linalg.matrix_rank(cov)
                    return T.linalg.inv_ex(cov).inverse @ LA.ldl_factor_ex(cov)[0] + T.linalg.inv_ex(cov).inverse
            """,
            unsafe_fixes=True,
            note="aliases; no fix for eigh / pinv / matrix_rank",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                h = model(x)
                U, S, Vh = torch.linalg.svd(h, full_matrices=False)
                u, s, v = torch.svd(h)
            """,
            count=2,
            note="`svd` runs the same kernel and status check as `svdvals`",
        ),
        Invalid(
            """
            import torch

            class Gaussian(torch.nn.Module):
                def forward(self, cov, check_errors: bool = False):
                    if check_errors:
                        torch.linalg.cholesky(cov)
                    try:
                        chol = torch.linalg.cholesky(cov)
                    except torch.linalg.LinAlgError:
                        chol = None
                    return chol
            """,
            count=2,
            unsafe_fixes=True,
            fixed="""
            import torch

            class Gaussian(torch.nn.Module):
                def forward(self, cov, check_errors: bool = False):
                    if check_errors:
                        torch.linalg.cholesky(cov)
                    try:
                        chol = torch.linalg.cholesky(cov)
                    except torch.linalg.LinAlgError:
                        chol = None
                    return chol
            """,
            note="no fix where raising is the purpose: an explicit error-checking branch, a `try` "
                 "that catches the error",
        ),
        Invalid(
            """
            import torch

            for x, y in loader:
                factors = torch.linalg.lu_factor(model(x))
                out = torch.linalg.lu_solve(factors.LU, factors.pivots, y)
            """,
            unsafe_fixes=True,
            fixed="""
            import torch

            for x, y in loader:
                factors = torch.linalg.lu_factor(model(x))
                out = torch.linalg.lu_solve(factors.LU, factors.pivots, y)
            """,
            note="a stored `lu_factor` result read by field: `[:2]` would be a plain tuple, so no fix",
        ),
    ]
    valid = [
        Valid(
            """
            import torch

            for x, y in loader:
                cov = model(x)
                a, info = torch.linalg.inv_ex(cov)
                l = torch.linalg.cholesky_ex(cov).L
                q, r = torch.linalg.qr(cov)
            """,
            note="the `_ex` variants, and functions without an error check",
        ),
        Valid(
            """
            import numpy as np
            import torch

            for x, y in loader:
                m = np.linalg.inv(np.eye(3))
                t = transform.inverse()
            """,
            note="numpy, and `.inverse()` on something that is not known to be a tensor",
        ),
        Valid(
            """
            import torch

            class Whitening(torch.nn.Module):
                def __init__(self, cov):
                    super().__init__()
                    self.register_buffer("w", torch.linalg.inv(cov))
            """,
            note="once, at construction",
        ),
    ]
    benchmark = Benchmark(
        setup="""
            x = torch.randn(size, size, device=device)
            a = torch.randn(max(size // 4, 1), 32, 32, device=device) + 32 * torch.eye(32, device=device)
        """,
        bad="""
            y = torch.tanh(x)
            result = torch.linalg.inv(a + y[0, 0])
        """,
        good="""
            y = torch.tanh(x)
            result = torch.linalg.inv_ex(a + y[0, 0]).inverse
        """,
        description="`torch.linalg.inv` vs `torch.linalg.inv_ex` on a batch of 32x32 matrices",
    )

    def visit_Call(self, node: ast.Call, ctx: RuleContext) -> None:
        name = ctx.call_name(node)
        function: str | None = None
        source: ast.expr | None = None
        method = False
        if name is not None and name.startswith("torch.linalg.") and name.count(".") == 2:
            function = name.rsplit(".", 1)[1]
        elif name in _ALIASES:
            function = _ALIASES[name]
        elif name is not None and name.startswith("torch.Tensor.") and name[13:] in _METHODS:
            function, method = _METHODS[name[13:]], True
            source = node.args[0] if node.args else None
        elif name is None:
            call = ctx.method_call(node, *_METHODS)
            if call is None or not device_tensor(ctx, call[0]):
                return
            source, function, method = call[0], _METHODS[call[1]], True
        if function is None or (function not in _WITH_EX and function not in _WITHOUT_EX
                                and function != "cholesky_old"):
            return
        if not method:
            source = argument(node, 0, "A") or argument(node, 0, "input")
        if source is not None and not device_input(ctx, source):
            return
        label = name if name is not None else f"Tensor.{node.func.attr}"  # type: ignore[attr-defined]
        if function in _WITH_EX:
            fix = None if _raising_is_the_purpose(node, ctx) else self._fix(node, ctx, function, method, source)
            ctx.report(node, fix=fix, call=f"{label}()", hint=f"; `torch.linalg.{function}_ex` does not")
        else:
            ctx.report(node, call=f"{label}()", hint="")

    def _fix(self, node: ast.Call, ctx: RuleContext, function: str, method: bool, source):
        if opaque_arguments(node) or any(kw.arg == "out" for kw in node.keywords) or source is None:
            return None
        if ctx.call_name(node) == "torch.inverse" and len(node.args) > 1:
            return None
        fields = _WITH_EX[function]
        parent = ctx.parent(node)
        if len(fields) == 1:
            suffix = "." + fields[0]
        elif (isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in fields) or (
                isinstance(parent, ast.Subscript) and parent.value is node
                and isinstance(parent.slice, ast.Constant) and parent.slice.value in (0, 1)):
            suffix = ""  # `.LU` / `[0]` reads the same field from the `_ex` result
        elif isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 \
                and isinstance(parent.targets[0], (ast.Tuple, ast.List)) and len(parent.targets[0].elts) == 2:
            suffix = "[:2]"  # `LU, piv = ...`: unpacking a plain tuple works the same
        else:
            return None  # a stored result read as `.LU` later: a plain tuple has no fields
        edits = []
        imports: list[str] = []
        func = node.func
        if method and ctx.call_name(node) is None:  # x.inverse()
            if node.args or node.keywords:
                return None
            torch, imports = torch_prefix(ctx)
            edits.append(ctx.replace(node, f"{torch}.linalg.{function}_ex({argument_text(ctx, source)}){suffix}"))
        elif method:  # torch.Tensor.inverse(x): the same arguments
            arguments = ctx.source.text[ctx.offsets(func)[1]:ctx.offsets(node)[1]]
            edits.append(ctx.replace(node, f"{_torch_of(ctx, func)}.linalg.{function}_ex{arguments}{suffix}"))  # type: ignore[arg-type]
        else:
            if isinstance(func, ast.Attribute) and ctx.call_name(node) in ("torch.inverse",):
                edits.append(ctx.replace(func, f"{ctx.text(func.value)}.linalg.{function}_ex"))
            elif isinstance(func, ast.Attribute):
                start, end = ctx.offsets(func)
                edits.append((end - len(func.attr), end, func.attr + "_ex"))
            else:
                torch, imports = torch_prefix(ctx)
                edits.append(ctx.replace(func, f"{torch}.linalg.{function}_ex"))
            end = ctx.offsets(node)[1]
            if suffix:
                edits.append(ctx.insert_at(end, suffix))
        return ctx.fix(
            Applicability.UNSAFE,
            f"Use `torch.linalg.{function}_ex` (no error raised on singular input: `info` is returned)",
            edits,
            imports=imports,
        )


def _torch_of(ctx: RuleContext, func: ast.Attribute) -> str:
    """`T` for `T.Tensor.inverse`: the spelling of `torch` the call already uses."""
    node: ast.expr = func
    while isinstance(node, ast.Attribute):
        if ctx.qualname(node) == "torch":
            return ctx.text(node)
        node = node.value
    return ctx.text(node) if ctx.qualname(node) == "torch" else torch_prefix(ctx)[0]


_CHECK_WORDS = ("check", "valid", "strict", "safe", "raise", "error", "debug", "assert")
_CAUGHT = ("LinAlgError", "RuntimeError", "Exception", "BaseException", "ValueError")


def _raising_is_the_purpose(node: ast.AST, ctx: RuleContext) -> bool:
    """The call sits where its error is wanted: an `if check_errors:` branch, the body of a
    `try` that catches `LinAlgError`, a `pytest.raises` block, a `check_*` function."""
    child, current = node, ctx.parent(node)
    while current is not None:
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = current.name.lstrip("_").lower()
            return name.startswith(("check", "validate", "assert", "verify"))
        if isinstance(current, ast.If) and child is not current.test and _mentions_check(current.test):
            return True
        if isinstance(current, ast.Try) and any(child is stmt for stmt in current.body) \
                and any(_catches(handler) for handler in current.handlers):
            return True
        if isinstance(current, (ast.With, ast.AsyncWith)) and any(
                isinstance(item.context_expr, ast.Call) and ctx.text(item.context_expr.func).endswith("raises")
                for item in current.items):
            return True
        child, current = current, ctx.parent(current)
    return False


def _mentions_check(test: ast.expr) -> bool:
    for part in ast.walk(test):
        word = part.id if isinstance(part, ast.Name) else part.attr if isinstance(part, ast.Attribute) else None
        if word is not None and any(w in word.lower() for w in _CHECK_WORDS):
            return True
    return False


def _catches(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for kind in types:
        name = kind.id if isinstance(kind, ast.Name) else kind.attr if isinstance(kind, ast.Attribute) else ""
        if name.endswith(_CAUGHT):
            return True
    return False
