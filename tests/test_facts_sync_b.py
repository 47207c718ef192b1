"""Shared facts and helpers added for the sync rules PFL212-PFL227: syntactic parents,
the `torch` alias for fixes, stream / event values, distribution tables, memoised code
paths, and the keyword rewrites that keep a call's layout."""

from __future__ import annotations

import ast
import textwrap

import pytest

from perflint.api import check_source
from perflint.facts.analysis import FileAnalysis
from perflint.facts.context import RuleContext
from perflint.facts.hints import hint_for_name
from perflint.facts.distributions import validating_distribution
from perflint.facts.torch_api import EVENT, STREAM, is_stream_or_event
from perflint.rewrite import add_keyword, remove_keyword, rewrite_expression
from perflint.source import SourceFile


def _analyze(code: str, visit):
    source = SourceFile(path="t.py", text=textwrap.dedent(code).lstrip("\n"))
    tree = source.parse()
    types = [t for t in vars(ast).values() if isinstance(t, type) and issubclass(t, ast.expr)]
    analysis = FileAnalysis(tree, {t: [visit] for t in types}, {visit: False})
    RuleContext(source, analysis)
    analysis.run()


def _values(code: str) -> dict[str, object]:
    """source text of each expression -> (value, hot) as the rules see them."""
    seen: dict[str, object] = {}

    def visit(node, ctx):
        seen[ctx.text(node)] = (ctx.value(node), ctx.hot)

    _analyze(code, visit)
    return seen


def test_parent_is_the_enclosing_node():
    found = {}

    def visit(node, ctx):
        if isinstance(node, ast.Call) and ctx.text(node) == "torch.unique(y)":
            parent = ctx.parent(node)
            found["parent"] = type(parent).__name__, ctx.text(parent)
            found["grand"] = type(ctx.parent(parent)).__name__

    _analyze(
        """
        import torch
        n = len(torch.unique(y))
        """,
        visit,
    )
    assert found == {"parent": ("Call", "len(torch.unique(y))"), "grand": "Assign"}


@pytest.mark.parametrize(
    "imports,expected",
    [
        ("import torch", "torch"),
        ("import torch as T", "T"),
        ("import torch as T\nimport torch", "torch"),
        ("from torch import unique", None),  # nothing binds the module itself
    ],
)
def test_torch_alias_is_a_bound_name(imports, expected):
    found = []

    def visit(node, ctx):
        if isinstance(node, ast.Name) and node.id == "marker":
            found.append(ctx.torch_alias())

    _analyze(imports + "\nmarker\n", visit)
    assert found == [expected]


def test_stream_and_event_values():
    values = _values(
        """
        import torch as T

        class Net(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.side = T.cuda.Stream()

            def forward(self, x, start_event):
                a = T.cuda.current_stream()
                b = T.cuda.default_stream(0)
                c = T.cuda.Event(enable_timing=True)
                d = T.Stream()
                e = self.side
                f = start_event
                g = T.cuda.synchronize
                return a, b, c, d, e, f, g, x
        """
    )
    for text in ("a", "b", "d", "e"):
        assert values[text][0] == STREAM, text
    for text in ("c", "f"):
        assert values[text][0] == EVENT, text
    assert not is_stream_or_event(values["x"][0])
    assert not is_stream_or_event(values["g"][0])


def test_stream_and_event_hints_are_names_only():
    assert hint_for_name("stream") == STREAM
    assert hint_for_name("h2d_stream") == STREAM
    assert hint_for_name("end_event") == EVENT
    assert hint_for_name("streams") is None
    assert hint_for_name("eventual") is None


@pytest.mark.parametrize(
    "qualname,expected",
    [
        ("torch.distributions.Normal", "Normal"),
        ("torch.distributions.normal.Normal", "Normal"),
        ("torch.distributions.Categorical", "Categorical"),
        ("torch.distributions.Independent", None),  # validates no tensor itself
        ("torch.distributions.TransformedDistribution", None),
        ("torch.distributions.transforms.AffineTransform", None),
        ("torch.distributions.kl_divergence", None),
        ("numpy.random.normal", None),
    ],
)
def test_validating_distributions(qualname, expected):
    assert validating_distribution(qualname) == expected


def test_validating_distribution_table_matches_torch():
    """Every Distribution class except the wrappers validates, with `validate_args` where
    the table says (the rule reads a positional flag from that position)."""
    import inspect

    D = pytest.importorskip("torch.distributions")

    from perflint.facts.distributions import VALIDATING_DISTRIBUTIONS

    wrappers = {"Distribution", "ExponentialFamily", "Independent", "MixtureSameFamily",
                "TransformedDistribution"}
    found = {}
    for name in D.__all__:
        cls = getattr(D, name)
        if inspect.isclass(cls) and issubclass(cls, D.Distribution) and name not in wrappers:
            found[name] = list(inspect.signature(cls.__init__).parameters)[1:].index("validate_args")
    assert found == VALIDATING_DISTRIBUTIONS


def test_code_after_a_cache_hit_return_is_not_hot():
    values = _values(
        """
        import torch

        class Resampler(torch.nn.Module):
            def forward(self, x):
                return x @ self._matrix(x.shape[-1], x.device)

            def _matrix(self, n, device):
                key = (n, device)
                cached = self._cache.get(key)
                if cached is not None:
                    return cached
                after_miss = torch.linalg.pinv(torch.ones(n, n, device=device))
                self._cache[key] = after_miss
                return after_miss

            def _other(self, n, mask):
                if mask is not None:
                    return mask
                still_hot = torch.ones(n)
                return still_hot

            def forward_masked(self, x, mask):
                return self._other(x.shape[0], mask)
        """
    )
    assert values["cached"][1] is True
    assert values["after_miss"][1] is False
    assert values["still_hot"][1] is True  # an ordinary early return is not a cache


def test_cache_hit_by_membership():
    values = _values(
        """
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                if x.shape[0] in self.memo:
                    return self.memo[x.shape[0]]
                computed = torch.unique(x)
                return computed
        """
    )
    assert values["computed"][1] is False


@pytest.mark.parametrize(
    "before,after",
    [
        ("f(x)", "f(x, k=V)"),
        ("f(\n    x, y=1\n)", "f(\n    x, y=1, k=V\n)"),
        ("f(x, y,)", "f(x, y, k=V,)"),
        ("f(\n    x,\n    y,  # c\n)", "f(\n    x,\n    y,  # c\n    k=V,\n)"),
        ("f(x,\n  y,\n)", "f(x,\n  y,\n  k=V,\n)"),
    ],
)
def test_add_keyword_keeps_the_layout(before, after):
    assert rewrite_expression(before, lambda c: add_keyword(c, "k", "V")) == after


@pytest.mark.parametrize(
    "before,after",
    [
        ("f(a, k=1)", "f(a)"),
        ("f(a, k=1, b=2)", "f(a, b=2)"),
        ("f(\n    a,  # keep\n    k=1,\n)", "f(\n    a,  # keep\n)"),
        ("f(\n    a,\n    k=1,\n    b=2,\n)", "f(\n    a,\n    b=2,\n)"),
    ],
)
def test_remove_keyword_keeps_the_layout(before, after):
    assert rewrite_expression(before, lambda c: remove_keyword(c, "k")) == after


def test_prefilter_triggers_let_rule_files_through():
    code = "import torch\nfor x, y in loader:\n    torch.cuda.empty_cache()\n"
    assert [d.code for d in check_source(code, "t.py", select=["PFL226"])] == ["PFL226"]


@pytest.mark.parametrize(
    "code,rule",
    [
        ("from torch import tensor as mk\nimport torch\nclass M(torch.nn.Module):\n"
         "    def forward(self, x):\n        return mk([x.sum(), x.max()])\n", "PFL215"),
        ("from torch import equal as same\nimport torch\nclass M(torch.nn.Module):\n"
         "    def forward(self, x, y):\n        return same(x, y)\n", "PFL220"),
        ("from torch import normal as gauss\nimport torch\nclass M(torch.nn.Module):\n"
         "    def forward(self, x):\n        return gauss(x, x.abs())\n", "PFL223"),
    ],
)
def test_triggers_admit_aliased_calls(code, rule):
    """The prefilter must not skip a file that only calls the function through an alias."""
    assert [d.code for d in check_source(code, "t.py", select=[rule])] == [rule]
