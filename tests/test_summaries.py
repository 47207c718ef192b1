"""Summaries across files (issue #12, parts 2-3): what crosses a module boundary besides
"this function runs every step".

Each test is a small project (its own `pyproject.toml`) in the shape of real training code,
split across modules. A trailing `# expect: PFL214` marks each finding perflint must report
on that line; every other line must stay silent. Each test holds the shape that must be
reached and a negative twin next to it: the same shape where the value is not what would
make the line sync (a Python list instead of a batch, a loader moved with
`non_blocking=True`, a generator that yields indices, an object whose method only runs at
set-up). Every file is also checked named alone: it reports its part of the whole run.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from perflint.api import check_paths
from perflint.cache import Cache
from perflint.config import SettingsResolver
from perflint.project import ProjectIndex, rebase
from perflint.facts.summaries import join_codes, join_summaries, split_summary

_EXPECT = re.compile(r"#\s*expect:\s*(PFL\d{3}(?:\s*,\s*PFL\d{3})*)\s*$")


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "proj"\n')
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def _expected(root: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(root.rglob("*.py")):
        for row, line in enumerate(path.read_text().splitlines(), start=1):
            match = _EXPECT.search(line)
            if match:
                found.update((path.relative_to(root).as_posix(), row, c.strip()) for c in match.group(1).split(","))
    return found


def _findings(root: Path, paths: list[str], **kw) -> set[tuple[str, int, str]]:
    report = check_paths([root / p for p in paths], SettingsResolver(root), jobs=1, **kw)
    assert report.file_errors == 0, [d.message for d in report.diagnostics if d.code == "PFL001"]
    return {(Path(d.path).resolve().relative_to(root).as_posix(), d.location.row, d.code)
            for d in report.diagnostics}


def check_project(tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The whole project reports exactly its markers; each file named alone, its part."""
    root = _project(tmp_path, files)
    monkeypatch.chdir(root)
    expected = _expected(root)
    assert expected, "a test without an expected finding proves nothing"
    whole = _findings(root, ["."])
    assert whole == expected
    for name in files:
        assert _findings(root, [name]) == {f for f in whole if f[0] == name}, name
    return root


# --------------------------------------------------------------------------- argument kinds
def test_a_batch_passed_to_another_module_is_a_batch_there(tmp_path, monkeypatch):
    check_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/metrics.py": """
            def masked_accuracy(preds, target, ignore_index=-100):
                valid = target != ignore_index
                return (preds[valid] == target[valid]).float().mean()  # expect: PFL214, PFL214

            def masked_names(preds, names, ignore_index=-100):
                valid = names != ignore_index
                return preds[valid]
        """,
        "pkg/model.py": """
            import lightning as L

            from .metrics import masked_accuracy, masked_names

            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    logits = self(x)
                    acc = masked_accuracy(logits.argmax(dim=1), y)
                    kept = masked_names(logits.argmax(dim=1), self.class_names)
                    return logits.sum()
        """,
    }, monkeypatch)


def test_a_loader_passed_to_another_module_keeps_its_settings(tmp_path, monkeypatch):
    """PFL105 where the batches of a pinned loader of main.py are copied in loop.py; PFL103
    and PFL104 on a loader of main.py whose batches loop.py moves every step. Twins: a loader
    only counted (never moved), a pinned loader copied with non_blocking=True."""
    check_project(tmp_path, {
        "main.py": """
            import torch
            from torch.utils.data import DataLoader

            from loop import count, fit, fit_async

            def main(train_set, test_set, model, opt, epochs):
                device = torch.device("cuda")
                pinned = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
                plain = DataLoader(train_set, batch_size=64)  # expect: PFL103, PFL104
                counted = DataLoader(test_set, batch_size=64)
                also_pinned = DataLoader(train_set, batch_size=64, num_workers=2, pin_memory=True)
                print(count(counted))
                for epoch in range(epochs):
                    fit(model, pinned, opt, device)
                    fit(model, plain, opt, device)
                    fit_async(model, also_pinned, opt, device)
        """,
        "loop.py": """
            def fit(model, loader, opt, device):
                for x, y in loader:
                    x, y = x.to(device), y.to(device)  # expect: PFL105
                    loss = model(x, y)
                    loss.backward()
                    opt.step()

            def fit_async(model, loader, opt, device):
                for x, y in loader:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    loss = model(x, y)
                    loss.backward()
                    opt.step()

            def count(loader):
                return sum(len(x) for x, _ in loader)
        """,
    }, monkeypatch)


def test_a_loader_followed_through_three_files_to_the_loop_that_moves_its_batches(tmp_path, monkeypatch):
    """main.py -> engine.fit -> a helper of engine.py -> loop.run_epoch, which copies the
    batches: the loader built in main.py is reported there. Twin: a loader handed the same
    way to a loop that keeps its batches on the host."""
    check_project(tmp_path, {
        "main.py": """
            from torch.utils.data import DataLoader

            import engine

            def main(ds, model, opt, device, epochs):
                loader = DataLoader(ds, batch_size=8)  # expect: PFL103, PFL104
                host = DataLoader(ds, batch_size=8)
                for epoch in range(epochs):
                    engine.fit(model, loader, opt, device)
                    engine.profile(host)
        """,
        "engine.py": """
            import loop

            def fit(model, loader, opt, device):
                return _run(model, loader, opt, device)

            def _run(model, loader, opt, device):
                return loop.run_epoch(model, loader, opt, device)

            def profile(loader):
                return loop.host_stats(loader)
        """,
        "loop.py": """
            def run_epoch(model, loader, opt, device):
                for x in loader:
                    x = x.to(device)
                    model(x).sum().backward()
                    opt.step()

            def host_stats(loader):
                for x in loader:
                    print(x.float().mean())
        """,
    }, monkeypatch)


# --------------------------------------------------------------------------- return values
def test_what_helpers_of_another_module_return(tmp_path, monkeypatch):
    """A mask, a tuple with a mask (`t > 0` of a parameter: known for the kinds of
    arguments the caller passes), a batch's labels and a parameter handed back cross as
    what they are; a tensor built in host memory makes its `.item()` no sync. Twins (an
    index tensor, the raw half of the tuple, a list of names) stay silent."""
    check_project(tmp_path, {
        "helpers.py": """
            import torch

            def finite_rows(t):
                return torch.isfinite(t).all(dim=1)

            def row_index(t):
                return torch.arange(t.shape[0], device=t.device)

            def split_positive(t):
                return t > 0, t

            def host_counts(labels, n):
                return torch.as_tensor([labels.count(i) for i in range(n)])

            def labels_of(batch):
                return batch["labels"]

            def names_of(meta):
                return [m["name"] for m in meta]

            def passthrough(t, tag):
                return t
        """,
        "train.py": """
            import torch

            import helpers

            def train(model, loader, opt, label_list):
                for batch in loader:
                    out = model(batch["x"])
                    out = out[helpers.finite_rows(out)]  # expect: PFL214
                    out = out[helpers.row_index(out)]
                    pos, raw = helpers.split_positive(out)
                    sel = out[pos]  # expect: PFL214
                    same = out[raw]
                    n = helpers.host_counts(label_list, 10).sum().item()
                    valid = helpers.labels_of(batch) != -1
                    out = out[valid]  # expect: PFL214
                    names = helpers.names_of(batch["meta"])
                    kept = out[helpers.passthrough(valid, "valid")]  # expect: PFL214
                    loss = out.sum()
                    loss.backward()
                    opt.step()
        """,
    }, monkeypatch)


def test_a_loader_returned_by_a_factory_of_another_module(tmp_path, monkeypatch):
    check_project(tmp_path, {
        "data.py": """
            from torch.utils.data import DataLoader

            def pinned_loader(dataset):
                return DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
        """,
        "train.py": """
            import data

            def train(model, dataset, opt, device):
                loader = data.pinned_loader(dataset)
                for x in loader:
                    x = x.to(device)  # expect: PFL105
                    model(x).sum().backward()
                    opt.step()
                for x in data.pinned_loader(dataset):
                    x = x.to(device, non_blocking=True)
                    model(x).sum().backward()
                    opt.step()
        """,
    }, monkeypatch)


GENERATOR_WRAPPER = """
    import time

    class MetricLogger:
        def log_every(self, iterable, print_freq):
            start = time.time()
            for i, obj in enumerate(iterable):
                yield obj
                if i % print_freq == 0:
                    print(f"{i}/{len(iterable)} {time.time() - start:.1f}s")

        def count_every(self, iterable, print_freq):
            for i, _ in enumerate(iterable):
                yield i
"""


def test_a_generator_wrapper_of_another_module_yields_the_batches_of_its_argument(tmp_path, monkeypatch):
    check_project(tmp_path, {
        "utils.py": GENERATOR_WRAPPER,
        "engine.py": """
            import torch

            import utils

            def train(model, dataset, opt, device):
                loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2)  # expect: PFL104
                logger = utils.MetricLogger()
                for images, targets in logger.log_every(loader, 10):
                    images = images.to(device)
                    model(images, targets).backward()
                    opt.step()

            def steps(model, dataset, device):
                loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2)
                logger = utils.MetricLogger()
                for step in logger.count_every(loader, 10):
                    print(torch.tensor(step).to(device))
        """,
    }, monkeypatch)


def test_loader_wrappers_named_like_loaders(tmp_path, monkeypatch):
    """`cycle(loader)` re-yields the loader's batches (copied in train.py: its loader is
    reported there); `prefetch(loader, device)` copies them itself and yields batches on the
    device (its loader is reported too, and `if x.sum() > 0` on one is a sync). Twin: a
    wrapper that yields the batches' sizes."""
    check_project(tmp_path, {
        "data.py": """
            def cycle(loader):
                while True:
                    for batch in loader:
                        yield batch

            def prefetch(loader, device):
                for x, y in loader:
                    yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

            def sizes(loader):
                for x, _ in loader:
                    yield len(x)
        """,
        "train.py": """
            import torch
            from torch.utils.data import DataLoader

            from data import cycle, prefetch, sizes

            def train(ds, model, opt, device, steps):
                loader = DataLoader(ds, batch_size=8, num_workers=2)  # expect: PFL104
                batches = cycle(loader)
                for step in range(steps):
                    x, y = next(batches)
                    x = x.to(device)
                    model(x, y).backward()
                    opt.step()

            def train_prefetched(ds, model, opt, device):
                loader = DataLoader(ds, batch_size=8, num_workers=2)  # expect: PFL104
                for x, y in prefetch(loader, device):
                    model(x, y).backward()
                    if x.sum() > 0:  # expect: PFL206
                        opt.step()

            def count(ds, device):
                loader = DataLoader(ds, batch_size=8, num_workers=2)
                for n in sizes(loader):
                    print(torch.tensor(n).to(device))
        """,
    }, monkeypatch)


def test_a_generator_wrapper_and_a_mask_helper_of_the_same_file(tmp_path, monkeypatch):
    """Same file: the wrapper yields its argument's batches; a helper returning
    `(...).all(-1).any(0)` of its tensor arguments is a mask at the call (its summary alone
    does not know its arguments are tensors); twins: `.sum(0)` is no mask, an index helper."""
    check_project(tmp_path, {
        "engine.py": GENERATOR_WRAPPER + """

    def in_center(gt, anchors, radius=1.5):
        offsets = (anchors[None, :, :2] - gt[:, None, :2]).abs()
        return (offsets < radius * gt[:, None, 2:]).all(-1).any(0)

    def center_count(gt, anchors, radius=1.5):
        offsets = (anchors[None, :, :2] - gt[:, None, :2]).abs()
        return (offsets < radius * gt[:, None, 2:]).sum(0)

    def train(model, dataset, opt, device, gt, anchors):
        loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2, pin_memory=True)
        logger = MetricLogger()
        for images, targets in logger.log_every(loader, 10):
            images = images.to(device)  # expect: PFL105
            preds = model(images)
            fg = in_center(gt, preds)
            preds = preds[fg]  # expect: PFL214
            counts = center_count(gt, preds)
            preds = preds[counts]
            preds.sum().backward()
            opt.step()
""".replace("    import time\n", "    import time\n\n    import torch\n", 1),
    }, monkeypatch)


# --------------------------------------------------------------------------- objects
def test_an_object_passed_to_a_constructor_or_a_function_of_another_module(tmp_path, monkeypatch):
    """`Head(Coder())` keeps the coder as `self.coder` and calls it in forward; a function
    of a third module gets the coder as a parameter and calls it every step: the coder's
    methods are hot in its own file. Twin: a method called only at set-up."""
    check_project(tmp_path, {
        "det/__init__.py": "",
        "det/coder.py": """
            import torch

            class Coder:
                def __init__(self, weights):
                    self.weights = weights

                def get_deltas(self, src, dst):
                    deltas = (dst - src) / src
                    assert (src > 0).all().item()  # expect: PFL201
                    return deltas

                def encode(self, boxes, stride):
                    assert (boxes > 0).all(), "degenerate box"  # expect: PFL207
                    return boxes / stride

                def describe(self):
                    return f"weights {torch.tensor(self.weights).tolist()}"
        """,
        "det/targets.py": """
            def build_targets(boxes, stride, coder):
                return coder.encode(boxes, stride)
        """,
        "det/head.py": """
            import torch
            from torch import nn

            from .targets import build_targets

            class OutputLayers(nn.Module):
                def __init__(self, size, box_coder):
                    super().__init__()
                    self.linear = nn.Linear(size, 4)
                    self.box_coder = box_coder
                    print(self.box_coder.describe())

                def forward(self, x, proposals, gt):
                    deltas = self.box_coder.get_deltas(proposals, gt)
                    targets = build_targets(gt, 8.0, self.box_coder)
                    return self.linear(x) - deltas - targets
        """,
        "det/model.py": """
            from torch import nn

            from .coder import Coder
            from .head import OutputLayers

            class Detector(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = OutputLayers(256, Coder((10.0, 10.0, 5.0, 5.0)))

                def forward(self, x, proposals, gt):
                    return self.head(x, proposals, gt)
        """,
    }, monkeypatch)


# --------------------------------------------------------------------------- the fixpoint and the cache
HELPER_MASK = """
    import torch

    def keep(t):
        return torch.isfinite(t)
"""
HELPER_HOST = """
    import torch

    def keep(t):
        return torch.ones(len(t), dtype=torch.bool)
"""
CALLER = """
    from helpers import keep

    def train(model, loader, opt):
        for x in loader:
            out = model(x)
            out = out[keep(out)]
            out.sum().backward()
            opt.step()
"""


def test_changing_what_a_helper_returns_reanalyzes_its_callers_and_nothing_else(tmp_path, monkeypatch):
    from perflint import api

    root = _project(tmp_path, {"helpers.py": HELPER_MASK, "train.py": CALLER, "other.py": "import torch\n"})
    monkeypatch.chdir(root)
    monkeypatch.setattr("perflint.cache.RACY_NS", 0)  # files just written count as settled
    cache_dir = tmp_path / "cache"

    def run(paths):
        return _findings(root, paths, cache=Cache.open(cache_dir))

    assert run(["."]) == {("train.py", 6, "PFL214")}
    linted, read = [], []
    real_lint, real_read = api.lint_target, Cache.lint
    monkeypatch.setattr(api, "lint_target", lambda *a, **k: linted.append(a[0].path.name) or real_lint(*a, **k))
    monkeypatch.setattr(Cache, "lint", lambda self, t, *a, **k: read.append(t.path.name) or real_read(self, t, *a, **k))
    assert run(["train.py"]) == {("train.py", 6, "PFL214")}
    assert run(["."]) == {("train.py", 6, "PFL214")}
    assert linted == [] and read == []  # an unchanged tree: every result from the index
    (root / "helpers.py").write_text(textwrap.dedent(HELPER_HOST).lstrip())
    assert run(["train.py"]) == set()  # the helper now returns a mask in host memory: no sync
    # the helper (unseeded, then seeded: its caller calls it every step), then its caller
    assert sorted(linted) == ["helpers.py", "helpers.py", "train.py"]
    linted.clear()
    assert run(["."]) == set() and linted == []


def test_summaries_join_upwards_and_classes_are_named_for_the_reader(tmp_path):
    assert join_codes("b", "t") == "t" and join_codes("-", "b") == "b" and join_codes("b", "LTN-") == "?"
    assert join_codes("(t,b)", "(c,b)") == "(t,b)" and join_codes("LTN-", "LFN-") == "LTN-"
    assert join_codes("LFN-", "L-0C") == "L???"
    # on the accelerator (arguments only): joined with any other tensor, only "a tensor"
    assert join_codes("g", "g") == "g" and join_codes("g", "t") == "t" and join_codes("c", "g") == "t"
    assert join_codes("Bg", "Bc") == "B" and join_codes("Bg", "Bg") == "Bg"
    assert join_summaries("-!$0:loader", "b!$1:other") == "b!$0:loader,$1:other"
    assert join_summaries("c", "B") == "?"
    # a training step on either side stays one: a loop calling it trains
    assert join_summaries("-;u", "b!$0:loader") == "b!$0:loader;u"
    assert split_summary("b!$0:loader;u") == ("b", [("0", "loader")], True)
    assert split_summary("-!$1:x") == ("-", [("1", "x")], False)
    files = {"pkg/__init__.py": "", "pkg/coder.py": "", "pkg/head.py": "", "pkg/model.py": ""}
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    index = ProjectIndex([tmp_path / name for name in files])
    # written by model.py (index 3) as it imports the class; read by head.py (2) or coder.py (1)
    assert rebase("(-,@.coder.Coder,-)", index, [{}, {}, {}, {}], 3, 2) == "(-,@pkg.coder.Coder,-)"
    assert rebase("(-,@.coder.Coder,-)", index, [{}, {}, {}, {}], 3, 1) == "(-,%Coder,-)"
    assert rebase("(%Head)", index, [{}, {}, {}, {}], 2, 3) == "(@pkg.head.Head)"
    assert rebase("(@numpy.Generator)", index, [{}, {}, {}, {}], 3, 2) == "(-)"


def test_arguments_known_on_the_accelerator_are_coded_so_and_returns_are_not():
    from perflint.facts.records import FunctionInfo
    from perflint.facts.summaries import Decoder, code_of
    from perflint.facts.values import Kind, Value

    on_device = Value(Kind.TENSOR, device="accel")
    assert code_of(on_device) == "g" and code_of(Value(Kind.BATCH, device="accel")) == "Bg"
    assert code_of(Value(Kind.TENSOR)) == "t" and code_of(Value(Kind.TENSOR, device="cpu")) == "c"
    owner = FunctionInfo("f", ast.parse("def f(): pass").body[0])
    assert code_of(on_device, owner) == "t"  # what a function returns: no new summaries
    decoded = Decoder({}).value("g")
    assert decoded.kind is Kind.TENSOR and decoded.on_accel
    assert Decoder({}).value("Bg").kind is Kind.BATCH and Decoder({}).value("Bg").on_accel
