"""The project pass: functions other files call every step are hot in their own file."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflint.api import check_paths, fix_paths
from perflint.cache import Cache
from perflint.config import SettingsResolver
from perflint.project import ProjectIndex, hot_functions, module_of

from project_files import write_project


write = write_project


PACKAGE = {
    "src/pkg/__init__.py": "",
    "src/pkg/metrics.py": """
        import torch

        def accuracy(logits, labels):
            return (logits.argmax(1) == labels).float().mean().item()

        def never_called_per_step(t):
            return t.sum().item()
    """,
    "src/pkg/losses/__init__.py": """
        from .focal import focal
    """,
    "src/pkg/losses/focal.py": """
        import torch

        from ..helpers import clamp_log

        def focal(logits, target):
            p = logits.sigmoid()
            if torch.isnan(p).any():
                p = torch.nan_to_num(p)
            return clamp_log(p).mean()
    """,
    "src/pkg/helpers.py": """
        import torch

        def clamp_log(p):
            floor = p.min().item()
            return torch.log(p.clamp(min=floor))
    """,
    "src/pkg/train.py": """
        import torch

        from . import metrics
        from .losses.focal import focal

        def fit(model, loader, optimizer):
            for x, y in loader:
                logits = model(x)
                loss = focal(logits, y)
                loss.backward()
                optimizer.step()
                acc = metrics.accuracy(logits, y)
        metrics.never_called_per_step(torch.ones(1))
    """,
}


def findings(report) -> set[tuple[str, int, str]]:
    return {(Path(d.path).name, d.location.row, d.code) for d in report.diagnostics}


def test_module_names_follow_package_directories(tmp_path):
    write(tmp_path, PACKAGE | {"scripts/run.py": "", "scripts/utils.py": ""})
    assert module_of(tmp_path / "src/pkg/losses/focal.py") == ("pkg.losses.focal", str(tmp_path / "src"))
    assert module_of(tmp_path / "src/pkg/__init__.py") == ("pkg", str(tmp_path / "src"))
    assert module_of(tmp_path / "scripts/utils.py") == ("utils", str(tmp_path / "scripts"))


def test_a_sibling_module_wins_over_one_of_the_same_name_in_a_namespace_directory(tmp_path):
    """ConvNeXt-V2: `import utils` in `engine.py` is `utils.py` beside it, not `models/utils.py`
    (a directory without `__init__.py`, whose files are also importable by their own names)."""
    write(tmp_path, {"engine.py": "", "utils.py": "", "models/utils.py": "", "models/net.py": ""})
    paths = [tmp_path / p for p in ("engine.py", "utils.py", "models/utils.py", "models/net.py")]
    index = ProjectIndex(paths)
    assert index.resolve(0, "utils.MetricLogger.update") == (1, "MetricLogger.update")
    assert index.resolve(3, "utils.LayerNorm") == (2, "LayerNorm")
    assert index.resolve(0, "models.utils.LayerNorm") == (2, "LayerNorm")


def test_relative_and_absolute_names_resolve_to_files(tmp_path):
    write(tmp_path, PACKAGE | {"scripts/run.py": "", "scripts/utils.py": ""})
    paths = [tmp_path / p for p in ("src/pkg/train.py", "src/pkg/metrics.py", "src/pkg/losses/focal.py",
                                    "src/pkg/helpers.py", "src/pkg/losses/__init__.py",
                                    "scripts/run.py", "scripts/utils.py")]
    index = ProjectIndex(paths)
    assert index.resolve(0, ".metrics.accuracy") == (1, "accuracy")
    assert index.resolve(0, ".losses.focal.focal") == (2, "focal")
    assert index.resolve(2, "..helpers.clamp_log") == (3, "clamp_log")
    assert index.resolve(4, ".focal.focal") == (2, "focal")  # from a package's __init__
    assert index.resolve(0, "pkg.metrics.accuracy") == (1, "accuracy")
    assert index.resolve(5, "utils.load") == (6, "load")
    assert index.resolve(0, "numpy.mean") is None
    assert index.resolve(0, "....too.far") is None
    assert hot_functions(index, [(".metrics.accuracy",), (), (), (), (), (), ()]) == {1: frozenset({"accuracy"})}


def test_helpers_in_other_files_are_hot_through_a_chain_of_calls(tmp_path):
    write(tmp_path, PACKAGE)
    report = check_paths([tmp_path / "src"], SettingsResolver(tmp_path), jobs=1)
    found = findings(report)
    assert ("metrics.py", 4, "PFL201") in found  # accuracy(): called from the loop in train.py
    assert ("focal.py", 7, "PFL206") in found  # focal(): called from the loop
    assert ("helpers.py", 4, "PFL201") in found  # clamp_log(): called from focal(), two files away
    assert not [f for f in found if f[0] == "metrics.py" and f[1] == 7], "called once, at import"


def test_same_findings_with_cache_and_processes(tmp_path):
    write(tmp_path, PACKAGE)
    resolver = SettingsResolver(tmp_path)
    reference = findings(check_paths([tmp_path / "src"], resolver, jobs=1))
    cache = Cache.open(tmp_path / ".cache")
    cold = findings(check_paths([tmp_path / "src"], SettingsResolver(tmp_path), jobs=2, cache=cache))
    warm = findings(check_paths([tmp_path / "src"], SettingsResolver(tmp_path), jobs=2,
                                cache=Cache.open(tmp_path / ".cache")))
    assert reference == cold == warm
    # Editing the caller so it no longer calls the helper every step changes the helper's findings.
    train = tmp_path / "src/pkg/train.py"
    train.write_text(train.read_text().replace("acc = metrics.accuracy(logits, y)", "pass"))
    after = findings(check_paths([tmp_path / "src"], SettingsResolver(tmp_path), jobs=1,
                                 cache=Cache.open(tmp_path / ".cache")))
    assert ("metrics.py", 4, "PFL201") not in after


@pytest.mark.parametrize("jobs", [1, 2])
def test_fix_applies_fixes_in_helpers_found_hot_across_files(tmp_path, jobs):
    write(tmp_path, {
        "proj/train.py": """
            from helpers import count_correct

            for x, y in loader:
                out = model(x)
                n = count_correct(out, y)
        """,
        "proj/helpers.py": """
            import torch

            def count_correct(out, y):
                return (out.argmax(1) == y).sum().item()
        """,
    })
    report = fix_paths([tmp_path / "proj"], SettingsResolver(tmp_path), unsafe=True, jobs=jobs)
    assert [Path(d.path).name for d in report.fixed] == ["helpers.py"]
    assert "return (out.argmax(1) == y).sum()\n" in (tmp_path / "proj/helpers.py").read_text()


# A detector the way libraries split it: a class whose instance the model holds, a helper
# re-exported by a package's `__init__.py`, and a script directory without `__init__.py`.
CLASSES = {
    "repo/det/__init__.py": "",
    "repo/det/coder.py": """
        import torch

        class BoxCoder:
            def encode(self, boxes, anchors):
                targets = (boxes - anchors) / anchors.clamp(min=1e-6)
                if torch.isnan(targets).any():
                    raise ValueError("NaN in targets")
                return targets

            def unused(self, t):
                return t.sum().item()
    """,
    "repo/det/utils/__init__.py": """
        from ._dense import to_dense_batch
    """,
    "repo/det/utils/_dense.py": """
        import torch

        def to_dense_batch(x, batch):
            size = int(batch.max()) + 1
            keep = batch >= 0
            return x[keep], size
    """,
    "repo/det/model.py": """
        import torch

        from det.coder import BoxCoder
        from det.utils import to_dense_batch

        class Detector(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.coder = BoxCoder()

            def forward(self, boxes, anchors, batch):
                dense, size = to_dense_batch(boxes, batch)
                return self.coder.encode(dense, anchors)
    """,
    "repo/tools/ops.py": """
        import torch

        def filter_boxes(pred, conf):
            keep = pred[:, 4] > conf
            pred = pred[keep]
            return pred
    """,
    "repo/val.py": """
        import torch

        from tools.ops import filter_boxes

        def run(model, dataloader, device):
            for img, targets in dataloader:
                out = model(img.to(device))
                kept = filter_boxes(out, 0.25)
    """,
}


def test_methods_reexports_namespace_directories_and_argument_kinds_cross_files(tmp_path):
    write(tmp_path, CLASSES)
    found = findings(check_paths([tmp_path / "repo"], SettingsResolver(tmp_path), jobs=1))
    assert ("coder.py", 6, "PFL206") in found  # BoxCoder.encode: called from Detector.forward
    assert not [f for f in found if f[0] == "coder.py" and f[1] == 11], "a method nobody calls per step"
    assert ("_dense.py", 4, "PFL204") in found  # to_dense_batch, imported through utils/__init__.py
    # `tools/` has no __init__.py; `pred` is a tensor from the caller, so the mask is known
    assert ("ops.py", 5, "PFL214") in found
    cache = Cache.open(tmp_path / ".cache")
    cold = findings(check_paths([tmp_path / "repo"], SettingsResolver(tmp_path), jobs=2, cache=cache))
    warm = findings(check_paths([tmp_path / "repo"], SettingsResolver(tmp_path), jobs=2,
                                cache=Cache.open(tmp_path / ".cache")))
    assert found == cold == warm


def test_class_methods_and_signatures_resolve(tmp_path):
    write(tmp_path, CLASSES)
    paths = [tmp_path / "repo" / p for p in ("det/model.py", "det/coder.py", "det/utils/__init__.py",
                                            "det/utils/_dense.py", "val.py", "tools/ops.py")]
    index = ProjectIndex(paths)
    assert index.resolve(0, "det.coder.BoxCoder.encode") == (1, "BoxCoder.encode")
    assert index.resolve(4, "tools.ops.filter_boxes") == (5, "filter_boxes")
    reexports = [(), (), (("to_dense_batch", "._dense.to_dense_batch"),), (), (), ()]
    calls = [("det.coder.BoxCoder.encode(t,t)", "det.utils.to_dense_batch"), (), (), (),
             ("tools.ops.filter_boxes(t,-)",), ()]
    assert hot_functions(index, calls, reexports) == {
        1: frozenset({"BoxCoder.encode(t,t)"}),
        3: frozenset({"to_dense_batch"}),
        5: frozenset({"filter_boxes(t,-)"}),
    }


# A hook reaches a helper object through the runner it is given: `runner.message_hub` is
# not typed in the hook's file, but the attribute is named after its class, defined in a
# module of that name (mmengine's `MessageHub` in `logging/message_hub.py`).
BY_NAME = {
    "pyproject.toml": "[project]\nname = 'eng'\n",
    "eng/__init__.py": "",
    "eng/logging/__init__.py": "",
    "eng/logging/message_hub.py": """
        import torch

        class MessageHub:
            def update_scalar(self, key, value):
                self.last = value.item() if isinstance(value, torch.Tensor) else value
    """,
    "eng/vis/__init__.py": "",
    "eng/vis/visual_backend.py": """
        import torch

        class VisualBackend:
            def add_scalar(self, key, value):
                self.last = value.item() if isinstance(value, torch.Tensor) else value
    """,
    "eng/a/__init__.py": "",
    "eng/a/meter_bank.py": """
        class MeterBank:
            def update(self, value):
                self.last = value.item()
    """,
    "eng/b/__init__.py": "",
    "eng/b/meter_bank.py": """
        class MeterBank:
            def update(self, value):
                self.last = value.item()
    """,
    "eng/hooks.py": """
        from mmengine.hooks import Hook

        class LogHook(Hook):
            def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
                runner.message_hub.update_scalar("train/loss", outputs["loss"])
                runner.meter_bank.update(outputs["loss"])  # two modules of that name: unknown

            def after_run(self, runner):
                runner.visual_backend.add_scalar("final/loss", runner.outputs["loss"])
    """,
}


def test_objects_found_by_the_name_of_the_attribute_holding_them(tmp_path):
    write(tmp_path, BY_NAME)
    found = findings(check_paths([tmp_path / "eng"], SettingsResolver(tmp_path), jobs=1))
    assert found == {("message_hub.py", 5, "PFL201")}  # not from after_run, not an ambiguous name
    paths = [tmp_path / p for p in ("eng/hooks.py", "eng/logging/message_hub.py", "eng/a/meter_bank.py",
                                    "eng/b/meter_bank.py")]
    index = ProjectIndex(paths)
    assert index.resolve(0, "*.message_hub.MessageHub.update_scalar") == (1, "MessageHub.update_scalar")
    assert index.resolve(0, "*.meter_bank.MeterBank.update") is None
    assert index.resolve(0, "*.visual_backend.VisualBackend.add_scalar") is None
