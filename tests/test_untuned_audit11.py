"""Findings from reading code nobody had tuned on (rotation Y: fast-autoaugment, ResNeSt,
T2T-ViT, YOLOX, x-transformers, Pointnet2, FairMOT, glow-tts...), each with its twin."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflint.api import check_paths
from perflint.config import SettingsResolver

from project_files import write_project

_LOADERS = """
    import torch

    def get_loader(ds):
        return torch.utils.data.DataLoader(ds, batch_size=64, num_workers=8, pin_memory=True)
"""
_TRAIN = """
    import torch
    from pkg.data import get_loader

    def main(ds, model, opt):
        for x, y in get_loader(ds):
            x, y = x.cuda(), y.cuda()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward(); opt.step(); opt.zero_grad()
"""


def _findings(root: Path) -> set[tuple[str, int, str]]:
    report = check_paths([root], SettingsResolver(root), jobs=1, cache=None)
    return {(Path(d.path).name, d.location.row, d.code) for d in report.diagnostics}


@pytest.mark.parametrize("clone", ["fast-autoaugment", "fast_autoaugment"])
def test_a_clone_with_an_init_at_its_top_still_imports_its_packages(tmp_path, clone):
    """fast-autoaugment has an `__init__.py` at its top. Its directory (a clone, named with a
    dash) cannot be a package, so `from pkg.data import ...` is imported from there and the
    loader's pinning is known in the loop. Named as an identifier, the clone may be a package
    (imported from its parent), and the absolute import does not name it: not followed."""
    root = tmp_path / clone
    write_project(root, {"pyproject.toml": "", "__init__.py": "", "pkg/__init__.py": "",
                         "pkg/data.py": _LOADERS, "pkg/train.py": _TRAIN})
    found = _findings(root)
    pinned = {("train.py", 6, "PFL105")}
    if clone == "fast-autoaugment":
        assert pinned <= found
    else:
        assert not pinned & found


_SAMPLER = """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class TextSampler(Dataset):
        def __getitem__(self, index):
            seq = self.data[index: index + 128].long()
            return {returned}

        def __len__(self):
            return len(self.data) // 128

    def train(model, optimizer, data):
        loader = DataLoader(TextSampler(data), batch_size=4)
        for batch in loader:
            model(batch.to("cuda")).backward()
            optimizer.step()
"""


@pytest.mark.parametrize("returned, reported", [("seq.cuda()", False), ("(seq.cuda(), seq.cuda())", False),
                                                ("seq", True), ("(seq, seq)", True)])
def test_a_dataset_that_returns_device_tensors_needs_no_pinning_nor_workers(tmp_path, returned, reported):
    """x-transformers' enwik8 sampler moves each item to the GPU in `__getitem__`: pinning
    fails on CUDA tensors and a forked worker cannot use CUDA. Returning host tensors, the
    same loader is reported."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "train.py": _SAMPLER.format(returned=returned)})
    codes = {code for _name, _row, code in _findings(root)}
    assert ({"PFL103", "PFL104"} <= codes) is reported
    assert bool({"PFL103", "PFL104"} & codes) is reported


_DECODER = """
    import torch

    class Decoder(torch.nn.Module):
        def forward(self, x):
            for layer_id, layer in enumerate(self.layers):
                x = layer(x)
                if {test}:
                    num_nan = x.isnan().sum().item()
                    print(f"layer {{layer_id}}: {{num_nan}} NaNs")
            return x
"""


@pytest.mark.parametrize("test, reported", [("x.isnan().any() | x.isinf().any()", False),
                                            ("x.isnan().any() or x.isinf().any()", False),
                                            ("x.isnan().any() | (x > 1).any()", True)])
def test_a_branch_that_reports_nan_or_inf_is_not_per_step(tmp_path, test, reported):
    """GroundingDINO's decoder counts NaNs only once its output is broken: the `if` syncs
    every step, its body does not. Or-ed with a test of healthy data, the body runs."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "decoder.py": _DECODER.format(test=test)})
    found = {(row, code) for _name, row, code in _findings(root)}
    assert (7, "PFL206") in found
    assert ((8, "PFL201") in found) is reported


_POSTPROCESS = """
    def postprocess(out):
        return [{{"rois": o{conversion}}} for o in out]
"""
_EVALUATE = """
    import torch
    from helpers import postprocess

    def evaluate(model, images):
        results = []
        for x in images:
            preds = postprocess(model(x.cuda()))[0]
            rois = preds["rois"]
            for i in range(rois.shape[0]):
                results.append(rois[i, :].tolist())
        return results
"""


@pytest.mark.parametrize("conversion, reported", [(".cpu().numpy()", False), ("", True)])
def test_numpy_arrays_another_module_returns_in_dicts_are_host_data(tmp_path, conversion, reported):
    """EfficientDet's `postprocess` returns `{"rois": boxes.cpu().numpy(), ...}` per image:
    `.tolist()` of a row, in the evaluation loop of another file, copies nothing. Returning
    the tensors themselves, it does."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "helpers.py": _POSTPROCESS.format(conversion=conversion),
                         "evaluate.py": _EVALUATE})
    assert (("evaluate.py", 10, "PFL202") in _findings(root)) is reported


_NEXT = """
    import torch

    model = torch.nn.Linear(16, 2).cuda()
    opt = torch.optim.Adam(model.parameters())

    def cycle(n):
        table = torch.arange(n).float().cuda()
        while True:
            seq = torch.randint(0, 2, (32, n)).float().cuda()
            yield seq * table, (seq.sum(-1) % 2).long()

    batches = cycle(16)
    {loop}
"""


@pytest.mark.parametrize("loop, reported", [
    ("for i in range(1000):\n        x, y = next(batches)\n"
     "        loss = torch.nn.functional.cross_entropy(model(x), y)\n        loss.backward(); opt.step()", True),
    ("x, y = next(batches)\n    print(model(x).shape)", False),
])
def test_a_generator_advanced_with_next_every_step_runs_its_loop_every_step(tmp_path, loop, reported):
    """x-transformers' `train_parity.py`: `dl = cycle()` before the training loop, `next(dl)`
    in it. The generator's `while True:` loop runs once per `next()`; what comes before it
    runs once. Advanced once, before any loop, the generator runs nothing every step."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "train.py": _NEXT.format(loop=loop)})
    found = {(row, code) for _name, row, code in _findings(root)}
    assert ((9, "PFL101") in found) is reported
    assert (7, "PFL101") not in found


_POSTPROCESSOR = """
    import torch

    class Masker{base}:
        def forward_single_image(self, masks, boxes):
            scale = torch.ones(len(boxes)).cuda()
            return [m * s for m, s in zip(masks, scale)]
"""


@pytest.mark.parametrize("base, reported", [("", False), ("(object)", False), ("(torch.nn.Module)", True)])
def test_forward_named_methods_of_a_class_with_no_base_are_not_per_step_by_name(tmp_path, base, reported):
    """maskrcnn-benchmark's `Masker.forward_single_image`, a post-processing helper of a plain
    class, is not a model's forward: per step only through a hot caller. A module's
    `forward_single_image` is one by its name."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "masker.py": _POSTPROCESSOR.format(base=base)})
    assert bool(_findings(root)) is reported


_RECUDA = """
    import torch
    from torch.utils.data import DataLoader

    def main(model, ds):
        loader = DataLoader(ds, batch_size=32, num_workers=2, pin_memory=True)
        for x, y in loader:
            y = y.cuda(non_blocking=True)
            x = {second}
            torch.nn.functional.cross_entropy(model(x), y.cuda()).backward()
"""


@pytest.mark.parametrize("second, reported", [("x.cuda(non_blocking=True)", set()), ("x.cuda()", {(8, "PFL105")})])
def test_moving_a_batch_already_on_the_device_again_is_no_copy(tmp_path, second, reported):
    """pytorch_resnet_cifar10's `target.cuda()` two lines after `target = target.cuda(...)`:
    a no-op, not a blocking copy of a pinned batch. The first move of a batch still is."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "train.py": _RECUDA.format(second=second)})
    assert {(row, code) for _name, row, code in _findings(root) if code == "PFL105"} == reported


_DEFINE_LOSS = """
    import torch
    from torch import nn

    def {name}(device):
        criterion = nn.MSELoss(reduction="none")
        return criterion.to(device).forward(torch.ones(2, device=device), torch.zeros(2, device=device).cuda())

    def main(model, device):
        criterion = {name}(device)
        for _ in range(100):
            x = torch.randn(4, 8, device=device)
            model(x).sum().backward()
"""


@pytest.mark.parametrize("name, reported", [("define_loss", False), ("build_loss", False), ("masked_loss", True)])
def test_a_function_that_defines_the_loss_is_not_a_loss_by_its_name(tmp_path, name, reported):
    """SRGAN's `define_loss()` builds the criterions once, before training; a function that
    computes a loss (`masked_loss`) is per-step by its name."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "train.py": _DEFINE_LOSS.format(name=name)})
    assert bool(_findings(root)) is reported


_HOOKED = """
    import torch

    class Monitor:
        def __init__(self, model):
            for module in model.modules():
                {register}

        def forward_hook(self, module, inputs, output):
            for p in module.parameters(recurse=False):
                print(p.abs().max().item())
"""


@pytest.mark.parametrize("register, reported", [("module.register_forward_hook(self.forward_hook)", True),
                                                ("pass", False)])
def test_a_method_registered_as_a_module_hook_runs_every_forward(tmp_path, register, reported):
    """transformers' `DebugUnderflowOverflow` registers `self.forward_hook` on every module:
    it runs on every forward. Its name alone (a plain class's `forward_*`) says nothing."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "monitor.py": _HOOKED.format(register=register)})
    assert bool(_findings(root)) is reported


_GATED_HOOK = """
    import torch

    class LogWriter:
        def __init__(self, model, interval):
            self.interval, self.batches = interval, 0
            for module in model.modules():
                def hook(module_, inputs, outputs):
                    if self._should_log_this_batch():
                        print(outputs.abs().max().item())
                module.register_forward_hook(hook)

        def _should_log_this_batch(self):
            assert self.interval is not None
            return {test}
"""


@pytest.mark.parametrize("test, reported", [("self.interval is not None and self.batches % self.interval == 0", False),
                                            ("self.interval is not None", True)])
def test_a_hook_gated_by_a_due_step_helper_is_not_per_step(tmp_path, test, reported):
    """allennlp's activation-histogram hook logs only when `_should_log_distributions_this_batch()`,
    which asserts, then returns `interval is not None and batches % interval == 0`."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "writer.py": _GATED_HOOK.format(test=test)})
    assert bool(_findings(root)) is reported
