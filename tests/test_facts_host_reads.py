"""Facts the host-read rules (PFL202-PFL210) rely on: which arguments PyTorch reads as host
numbers, which calls convert tensors to Python scalars, device moves, shapes, eager-only
branches, lazily evaluated lambdas and name hints."""

from __future__ import annotations

import ast
import textwrap

import pytest

from perflint.facts.analysis import FileAnalysis
from perflint.facts.calls import converts_to_python_scalar
from perflint.facts.context import RuleContext
from perflint.facts.hints import hint_for_name, is_logger_name
from perflint.facts.torch_api import int_arguments, is_non_blocking, move_destination
from perflint.facts.values import Kind
from perflint.source import SourceFile


def facts(code: str) -> dict[str, tuple]:
    """Expression text -> (value, hot, torch alias) as rules see it (last occurrence wins)."""
    source = SourceFile(path="t.py", text=textwrap.dedent(code).lstrip("\n"))
    seen: dict[str, tuple] = {}

    def visit(node, ctx):
        seen[ast.unparse(node)] = (ctx.value(node), ctx.hot, ctx.torch_alias())

    types = [t for t in vars(ast).values() if isinstance(t, type) and issubclass(t, ast.expr)]
    analysis = FileAnalysis(source.parse(), {t: [visit] for t in types}, {visit: False})
    RuleContext(source, analysis)
    analysis.run()
    return seen


def _call(text: str) -> ast.Call:
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


def _resolve(node: ast.expr) -> str | None:
    text = ast.unparse(node)
    return text if text.startswith("torch.") else None


def _no_value(node: ast.expr):
    from perflint.facts.values import UNKNOWN

    return UNKNOWN


# --------------------------------------------------------------------------- torch_api
@pytest.mark.parametrize(
    "code,expected",
    [
        ("t.cpu()", "cpu"),
        ("t.cuda()", "accel"),
        ('t.to("cpu")', "cpu"),
        ('t.to("cuda:0", non_blocking=True)', "accel"),
        ('t.to(torch.device("cpu"))', "cpu"),
        ('t.to(device="cpu")', "cpu"),
        ('t.to(torch.float32, device="cpu")', "cpu"),
        ("t.to(torch.float32)", None),
        ("t.to(dev)", None),
        ("t.float()", None),
    ],
)
def test_move_destination(code, expected):
    call = _call(code)
    assert move_destination(call.func.attr, call, _resolve, _no_value) == expected


@pytest.mark.parametrize(
    "code,expected",
    [
        ('t.to("cpu")', False),
        ('t.to("cpu", non_blocking=True)', True),
        ('t.to("cpu", non_blocking=False)', False),
        ('t.to("cpu", non_blocking=flag)', None),
        ('t.to("cpu", torch.float16, True)', True),
        ("t.to(other, True)", True),
    ],
)
def test_is_non_blocking(code, expected):
    assert is_non_blocking(_call(code)) is expected


@pytest.mark.parametrize(
    "qualname,method,code,expected",
    [
        ("torch.zeros", None, "torch.zeros(n, 3, device=d)", ["n", "3"]),
        ("torch.zeros", None, "torch.zeros((n, m), dtype=x)", ["n", "m"]),
        ("torch.zeros", None, "torch.zeros(size=(n,))", ["n"]),
        ("torch.full", None, "torch.full((n,), v)", ["n"]),
        ("torch.arange", None, "torch.arange(0, n, 2)", ["0", "n", "2"]),
        ("torch.reshape", None, "torch.reshape(x, (n, -1))", ["n", "-1"]),
        ("torch.narrow", None, "torch.narrow(x, 0, s, n)", ["s", "n"]),
        ("torch.nn.functional.pad", None, "F.pad(x, (0, n))", ["0", "n"]),
        ("torch.add", None, "torch.add(x, n)", []),
        (None, "view", "x.view(n, -1)", ["n", "-1"]),
        (None, "new_full", "x.new_full((n,), v)", ["n"]),
        (None, "narrow", "x.narrow(0, s, n)", ["s", "n"]),
        (None, "topk", "x.topk(k, dim=1)", ["k"]),
        (None, "view", "x.view(*shape)", []),
        (None, "sum", "x.sum(n)", []),
    ],
)
def test_int_arguments(qualname, method, code, expected):
    found = int_arguments(qualname, method, _call(code))
    assert [ast.unparse(n) for n in found] == expected


@pytest.mark.parametrize(
    "name,expected",
    [
        ("builtins.float", True),
        ("builtins.int", True),
        ("builtins.bool", True),
        ("builtins.complex", True),
        ("operator.index", True),
        ("math.sqrt", True),
        ("math.isnan", True),
        ("math.factorial", True),
        ("math.prod", False),  # multiplies the tensors with `*`
        ("math.trunc", False),  # raises for tensors
        ("builtins.len", False),
        ("builtins.str", False),
        ("numpy.sqrt", False),
        (None, False),
    ],
)
def test_converts_to_python_scalar(name, expected):
    assert converts_to_python_scalar(name) is expected


def test_math_conversions_match_torch():
    """The table agrees with what torch 2.13 does for each `math` function on a 0-dim tensor."""
    torch = pytest.importorskip("torch")
    import math

    from torch.utils._python_dispatch import TorchDispatchMode

    class Reads(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "_local_scalar_dense" in str(func):
                Reads.count += 1
            return func(*args, **(kwargs or {}))

    checked = 0
    for name in ("sqrt", "exp", "log", "isnan", "isfinite", "floor", "ceil", "fabs", "prod"):
        arg = torch.tensor([2.0, 3.0]) if name == "prod" else torch.tensor(2.0)
        Reads.count = 0
        with Reads():
            getattr(math, name)(arg)
        assert (Reads.count > 0) is converts_to_python_scalar(f"math.{name}"), name
        checked += 1
    assert checked == 9


# --------------------------------------------------------------------------- hints
def test_logger_names():
    for name in ("logger", "log", "LOGGER", "_logger", "train_logger", "logger_main", "_log"):
        assert is_logger_name(name), name
    for name in ("logits", "blog", "catalog", "log_probs", "logdet"):
        assert not is_logger_name(name), name


def test_python_parameter_hints():
    for name in ("layer_type", "patch_height", "width", "attn_mode", "prefix", "kernel_size", "task_name"):
        hint = hint_for_name(name, parameter=True)
        assert hint is not None and hint.kind is Kind.PYTHON, name
    assert hint_for_name("layer_type") is None  # locals keep their data flow
    for name in ("loss_key", "loss_name", "loss_type", "loss_dict"):
        assert hint_for_name(name) is None, name
    assert hint_for_name("loss_mask").kind is Kind.TENSOR


# --------------------------------------------------------------------------- analysis
def test_shapes_are_tuples_of_python_ints():
    seen = facts(
        """
        import torch

        class Net(torch.nn.Module):
            def forward(self, x, batch):
                b, c = x.shape
                h = x.size()[2]
                s = batch.shape
                same = x.shape == (1, 2)
                return b, c, h, s, same
        """
    )
    assert seen["x.shape"][0].kind is Kind.SEQ
    assert seen["b"][0].kind is Kind.PYTHON
    assert seen["x.size()"][0].kind is Kind.SEQ
    assert seen["h"][0].kind is Kind.PYTHON
    assert seen["batch.shape"][0].kind is Kind.SEQ  # a batch's metadata is the tensor's
    assert seen["x.shape == (1, 2)"][0].kind is Kind.PYTHON


def test_parameters_and_star_kwargs_have_no_known_device():
    seen = facts(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, dd):
                super().__init__()
                self.table = nn.Parameter(torch.zeros(3))
                self.plain = torch.zeros(3)
                self.made = torch.empty(3, **dd)

            def forward(self, x):
                return x.to(self.table), self.plain, self.made
        """
    )
    assert seen["self.table"][0].device is None  # moves with model.to(device)
    assert seen["self.plain"][0].device == "cpu"  # a plain attribute does not move
    assert seen["self.made"][0].device is None  # **dd may carry device=


def test_eager_only_branches():
    seen = facts(
        """
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                if torch.jit.is_scripting():
                    shape = torch.tensor(x.shape)
                    scripted = x.sum()
                else:
                    shape = x.shape
                if 0:
                    dead = x.max()
                if not torch.jit.is_tracing():
                    eager = x.min()
                return min(shape)
        """
    )
    assert seen["x.sum()"][1] is False
    assert seen["x.max()"][1] is False
    assert seen["x.min()"][1] is True
    assert seen["shape"][0].kind is Kind.SEQ  # only the eager branch's value survives


def test_lambda_bodies_are_not_hot_and_failing_branches_leave_the_step():
    seen = facts(
        """
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                torch._check(x.numel() > 0, lambda: f"bad {x.sum()}")
                if x.numel() == 0:
                    first = x.tolist()
                    torch._assert(False, "empty")
                later = x.abs()
                return later
        """
    )
    assert seen["x.sum()"][1] is False
    assert seen["x.tolist()"][1] is False
    assert seen["x.abs()"][1] is True


def test_torch_function_tables():
    seen = facts(
        """
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                d = torch.get_autocast_dtype("cuda")
                ckpt = torch.load("f.pt")
                cls = x.__class__
                return d, ckpt, cls
        """
    )
    assert seen["torch.get_autocast_dtype('cuda')"][0].kind is Kind.DTYPE
    assert seen["torch.load('f.pt')"][0].kind is Kind.UNKNOWN
    assert seen["x.__class__"][0].kind is Kind.PYTHON


def test_torch_alias_only_counts_imports():
    unbound = facts(
        """
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                return x.abs()
        """
    )
    assert unbound["x.abs()"][2] is None
    aliased = facts(
        """
        import torch as T

        class Net(T.nn.Module):
            def forward(self, x):
                return x.abs()
        """
    )
    assert aliased["x.abs()"][2] == "T"


def test_callers_passing_python_values_override_a_tensor_annotation():
    seen = facts(
        """
        import torch

        class Net(torch.nn.Module):
            def lengths(self, n: torch.LongTensor):
                return int((n - 127) / 64 + 1)

            def scale(self, t: torch.Tensor):
                return t.abs()

            def forward(self, x, mask):
                a = self.lengths(mask.shape[-1])
                b = self.scale(x)
                return x[:a] * b
        """
    )
    assert seen["n"][0].kind is Kind.PYTHON
    assert seen["t"][0].kind is Kind.TENSOR
