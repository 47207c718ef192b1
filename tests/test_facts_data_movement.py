"""Facts the data-movement rules rely on: batches remember their DataLoader call, helpers
summarized during the module walk see module imports, batch attributes, the torch alias a
fix may write, and the name hints that tell modules from their inputs."""

from __future__ import annotations

import ast
import textwrap

import pytest

from perflint.facts.analysis import FileAnalysis
from perflint.facts.context import RuleContext
from perflint.facts.hints import hint_for_name
from perflint.facts.values import Kind
from perflint.source import SourceFile


def _analyze(code: str, on_expr=None, on_call=None):
    """Run the analyzer over `code`; `on_expr(node, ctx)` sees every Name/Attribute/Call."""
    source = SourceFile("t.py", textwrap.dedent(code).lstrip("\n"))
    tree = source.parse()
    seen: list = []

    def visit(node, ctx):
        seen.append((node, ctx.value(node), ctx))
        if on_expr is not None:
            on_expr(node, ctx)

    dispatch = {ast.Name: [visit], ast.Attribute: [visit], ast.Call: [visit]}
    analysis = FileAnalysis(tree, dispatch, {visit: False})
    RuleContext(source, analysis)
    analysis.run()
    return tree, seen


def _value_of(code: str, text: str, line: int | None = None):
    """The last value the analyzer gave an expression whose source is `text`."""
    tree, seen = _analyze(code)
    found = [(n, v) for n, v, _ in seen if ast.unparse(n) == text and (line is None or n.lineno == line)]
    assert found, f"no expression `{text}`"
    return found[-1]


def _loader_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("DataLoader")]


def test_batches_remember_the_dataloader_call_through_wrappers_and_attributes():
    code = """
        import torch
        from tqdm import tqdm
        from torch.utils.data import DataLoader

        class Trainer:
            def __init__(self, ds):
                self.loader = DataLoader(ds, batch_size=4)

            def fit(self):
                for step, (x, y) in enumerate(tqdm(self.loader)):
                    moved = x.to(device)
    """
    tree, seen = _analyze(code)
    (call,) = _loader_calls(tree)
    x = [v for n, v, _ in seen if isinstance(n, ast.Name) and n.id == "x"]
    assert x and all(v.kind is Kind.BATCH and v.origin is call for v in x)
    moved = [v for n, v, _ in seen if ast.unparse(n) == "x.to(device)"]
    assert moved[-1].origin is call, "a moved batch keeps its origin"


def test_a_loader_returned_by_a_helper_called_at_module_level_keeps_its_origin():
    code = """
        from torch.utils.data import DataLoader

        def make(ds):
            return DataLoader(ds, num_workers=0)

        train = make(train_set)
        for batch in train:
            batch.cuda()
    """
    tree, seen = _analyze(code)
    (call,) = _loader_calls(tree)
    batches = [v for n, v, _ in seen if isinstance(n, ast.Name) and n.id == "batch"]
    assert batches and all(v.kind is Kind.BATCH and v.origin is call for v in batches)


def test_two_loaders_joined_have_no_single_origin():
    code = """
        from torch.utils.data import DataLoader

        loader = DataLoader(a) if flag else DataLoader(b)
        for batch in loader:
            batch.cuda()
    """
    _, value = _value_of(code, "batch")
    assert value.kind is Kind.BATCH and value.origin is None


def test_module_level_helpers_see_imports_and_classes_defined_before_the_walk():
    code = """
        from torch.utils.data import DataLoader as DL

        class Net:
            pass

        def build():
            return DL(data), Net()

        pair = build()
        loader, net = pair
        use(loader, net)
    """
    _, loader = _value_of(code, "loader")
    _, net = _value_of(code, "net")
    assert loader.kind is Kind.LOADER
    assert net.kind is Kind.OBJECT and net.ref == "Net"


def test_batch_device_and_dtype_attributes():
    code = """
        for x, y in loader:
            d = x.device
            t = x.dtype
            s = x.shape
            inner = x.pixel_values
    """
    assert _value_of(code, "x.device")[1].kind is Kind.DEVICE
    assert _value_of(code, "x.dtype")[1].kind is Kind.DTYPE
    shape = _value_of(code, "x.shape")[1]  # torch.Size: a tuple of Python ints
    assert shape.kind is Kind.SEQ and shape.elem is not None and shape.elem.kind is Kind.PYTHON
    assert _value_of(code, "x.pixel_values")[1].kind is Kind.BATCH


@pytest.mark.parametrize(
    "header,expected",
    [
        ("import torch\n", "torch"),
        ("import torch as T\n", "T"),
        ("from torch import zeros\n", None),
        ("", None),
    ],
)
def test_torch_alias_is_a_real_binding(header, expected):
    aliases = []

    def record(node, ctx):
        if isinstance(node, ast.Call):
            aliases.append(ctx.torch_alias())

    _analyze(header + "x = f(1)\n", on_expr=record)
    assert aliases == [expected]


def test_function_node_is_the_function_being_walked():
    nodes = []

    def record(node, ctx):
        if isinstance(node, ast.Call):
            nodes.append(ctx.function_node)

    tree, _ = _analyze("def f():\n    g()\nh()\n", on_expr=record)
    functions = {type(n).__name__ for n in nodes}
    assert functions == {"FunctionDef", "Module"}


@pytest.mark.parametrize(
    "name,kind",
    [
        ("model", Kind.MODULE),
        ("ema_model", Kind.MODULE),
        ("model_ema", Kind.MODULE),
        ("net_g", Kind.MODULE),
        ("text_encoder", Kind.MODULE),
        ("model_inputs", None),
        ("model_kwargs", None),
        ("model_output", None),
        ("model_name", None),
        ("audio_mask_from_encoder", None),
    ],
)
def test_module_name_hints(name, kind):
    hint = hint_for_name(name)
    assert (hint.kind if hint else None) is kind
