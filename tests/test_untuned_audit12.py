"""Findings from reading code nobody had tuned on (rotations AB and ABr: LaneATT, votenet,
yolov4-pytorch, stargan, PSMNet, NAFNet, U-2-Net...), each with its twin."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflint.api import check_paths
from perflint.config import SettingsResolver

from project_files import write_project


def _findings(root: Path) -> set[tuple[str, int, str]]:
    report = check_paths([root], SettingsResolver(root), jobs=1, cache=None)
    return {(Path(d.path).name, d.location.row, d.code) for d in report.diagnostics}


_LOG_STEP = """
    def log_step(step, loss):
        print("step {} loss {:.5f}".format(step, loss))
"""
_TRAIN_LOGGING = """
    import torch
    from logutil import log_step

    def train(model, loader, optimizer):
        for step, (x, y) in enumerate(loader):
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            log_step(step, {passed})
"""


@pytest.mark.parametrize("passed, reported", [("loss.item()", False), ("0.5", False), ("loss", True)])
def test_a_python_number_passed_by_position_to_another_file_is_not_a_tensor(tmp_path, passed, reported):
    """LaneATT's `exp.iter_update(epoch, ..., loss.item(), ...)`: the parameter is named
    `loss`, but every caller passes a Python number, so formatting it copies nothing. The
    tensor itself passed there is still a per-step copy."""
    write_project(tmp_path, {"pyproject.toml": "", "logutil.py": _LOG_STEP,
                             "train.py": _TRAIN_LOGGING.replace("{passed}", passed)})
    assert (("logutil.py", 2, "PFL210") in _findings(tmp_path)) is reported


_FIT_ONE_EPOCH = """
    import torch

    def fit_one_epoch(model, optimizer, gen, cuda, focal_loss):
        for imgs, labels in gen:
            if cuda:
                imgs, labels = imgs.cuda(non_blocking=True), labels.cuda(non_blocking=True)
            outputs = model(imgs)
            if focal_loss:
                loss = torch.nn.functional.cross_entropy(outputs, labels, reduction="none").mean()
            else:
                loss = torch.nn.functional.cross_entropy(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""
_TRAIN_EPOCHS = """
    import torch
    from torch.utils.data import DataLoader
    from utils_fit import fit_one_epoch

    if __name__ == "__main__":
        cuda = True
        focal_loss = {flag}
        model = torch.nn.Linear(4, 2).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
        for epoch in range(100):
            fit_one_epoch(model, optimizer, gen, cuda, focal_loss)
"""


@pytest.mark.parametrize("flag, reported", [("False", False), ("torch.ones((), device='cuda')", True)])
def test_a_flag_named_like_a_loss_given_to_the_epoch_function_is_a_python_value(tmp_path, flag, reported):
    """unet-pytorch's `fit_one_epoch(..., gen, ..., dice_loss, focal_loss, ...)`, called from
    the epoch loop with `focal_loss = False`: `if focal_loss:` tests a Python flag, however
    the parameter is named. Given a tensor there, the test is a per-step sync."""
    write_project(tmp_path, {"pyproject.toml": "", "utils_fit.py": _FIT_ONE_EPOCH,
                             "train.py": _TRAIN_EPOCHS.replace("{flag}", flag)})
    assert (("utils_fit.py", 8, "PFL206") in _findings(tmp_path)) is reported


_CONFIG = """
    import torch
    from easydict import EasyDict as edict

    cfg = edict()
    cfg.GLOBAL = edict()
    cfg.GLOBAL.DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg.GLOBAL.DTYPE = torch.float16
    DEVICE = torch.device("cuda")
"""
_CELL = """
    import torch
    from config import cfg, DEVICE

    class Cell(torch.nn.Module):
        def forward(self, inputs):
            state = torch.zeros(inputs.size(0), 4).to({target})
            return inputs + state
"""


@pytest.mark.parametrize("target, reported", [("cfg.GLOBAL.DEVICE", True), ("DEVICE", True),
                                              ("cfg.GLOBAL.DTYPE", False)])
def test_a_device_held_by_a_config_module_is_a_device(tmp_path, target, reported):
    """Precipitation-Nowcasting's `.to(cfg.GLOBAL.DEVICE)` with the config object made in
    another module: named as a device, it is a move. A dtype held there is a cast."""
    write_project(tmp_path, {"pyproject.toml": "", "config.py": _CONFIG,
                             "cell.py": _CELL.replace("{target}", target)})
    assert (("cell.py", 6, "PFL101") in _findings(tmp_path)) is reported


_HELPER = """
    def loss_and_count(pred, target):
        loss = (pred - target).abs().mean()
        return loss, loss.item()
"""
_SCRIPT = """
    from helpers import loss_and_count

    def run(model, loader):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss, value = loss_and_count(model(x), y)
            {extra}
"""


@pytest.mark.parametrize("evaluation", ["eval.py", "evaluate_pose.py", "test_net.py", "demo.py"])
def test_a_helper_reached_from_training_and_evaluation_is_explained_by_the_training_loop(tmp_path, evaluation):
    """votenet's and monodepth2's helpers run every step of the training loop and of an
    evaluation script: the chain shown is the training one, whichever name sorts first."""
    root = tmp_path / "proj"  # (pytest's directory is named after the test: `test_...`)
    write_project(root, {"pyproject.toml": "", "helpers.py": _HELPER,
                         evaluation: _SCRIPT.replace("{extra}", "print(value)"),
                         "train.py": _SCRIPT.replace("{extra}", "loss.backward()")})
    report = check_paths([root], SettingsResolver(root), jobs=1, cache=None)
    assert _chain_files(report) == ["train.py", "train.py"]


def _chain_files(report) -> list[str]:
    item = [d for d in report.diagnostics if Path(d.path).name == "helpers.py" and d.code == "PFL201"]
    assert len(item) == 1
    return [Path(step.split(":")[0]).name for step in item[0].extra["hot_path"]]


def test_a_script_that_trains_and_validates_is_a_training_script(tmp_path):
    """`train_val.py` names validation, and trains: it explains the helper before a demo."""
    root = tmp_path / "proj"
    write_project(root, {"pyproject.toml": "", "helpers.py": _HELPER,
                         "demo.py": _SCRIPT.replace("{extra}", "print(value)"),
                         "train_val.py": _SCRIPT.replace("{extra}", "loss.backward()")})
    report = check_paths([root], SettingsResolver(root), jobs=1, cache=None)
    assert _chain_files(report) == ["train_val.py", "train_val.py"]


_DEAD_AFTER_RETURN = """
    import torch

    class Trainer:
        def test(self, model, loader):
            {first}
            for batch, label in loader:
                batch = batch.cuda()
                pred = model(batch).max(1)[1]
                print(pred.cpu().eq(label).sum())
"""


@pytest.mark.parametrize("first, reported", [("return", False), ("model.eval()", True)])
def test_code_after_a_return_at_the_top_of_a_function_never_runs(tmp_path, first, reported):
    """pytorch-pruning's `def test(self): return` followed by the evaluation loop it disabled:
    the loop is dead code, not an evaluation every epoch."""
    write_project(tmp_path / "proj", {"pyproject.toml": "", "finetune.py": _DEAD_AFTER_RETURN.replace("{first}", first)})
    assert (("finetune.py", 9, "PFL203") in _findings(tmp_path / "proj")) is reported


_VISUALIZE = """
    import torch
    import torch.nn.functional as F

    def main(model, loader, val_loader, opt, vis_interval=1000):
        for step, batch in enumerate(loader):
            batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
            loss = F.mse_loss(model(batch["images"]), batch["targets"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % vis_interval == 0:
                for index, image in enumerate({rows}):
                    arr = image.cpu().numpy()
                    print(index, arr.shape)
"""


@pytest.mark.parametrize("rows, reported", [('batch["images"][:4]', False), ("batch['images']", False),
                                            ("val_loader", True)])
def test_the_rows_of_the_batch_in_a_throttled_block_are_not_a_loop_over_batches(tmp_path, rows, reported):
    """textdiffuser-2's visualisation every `vis_interval` steps iterates the first images of
    the current batch: not a loop over the data of its own, so the throttle holds. A loop over
    another loader there (an evaluation every n steps) still runs per batch of that loader."""
    write_project(tmp_path / "proj", {"pyproject.toml": "", "train.py": _VISUALIZE.replace("{rows}", rows)})
    assert (("train.py", 13, "PFL203") in _findings(tmp_path / "proj")) is reported


_DECODING_MODEL = """
    import torch.nn as nn
    import torch.nn.functional as F

    class NATModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x, y):
            {forward}

        def {name}(self, tokens):
            scores = self.proj(tokens.float())
            keep = scores.max(-1)[0] > 0
            return tokens[keep]
"""


@pytest.mark.parametrize("name, forward, reported", [
    ("forward_decoder", "return F.mse_loss(self.proj(x), y)", False),
    ("forward_test", "return F.mse_loss(self.proj(x), y)", False),
    ("forward_decoder", "return F.mse_loss(self.proj(x), y) + self.forward_decoder(x).sum()", True),
    ("forward_train", "return F.mse_loss(self.proj(x), y)", True),
])
def test_a_decoding_entry_point_of_a_model_is_not_a_step_by_its_name(tmp_path, name, forward, reported):
    """fairseq's `forward_decoder`, which only the sequence generator calls: `forward_train`
    is a step by its name (a framework calls it), a decoding or test entry point is not,
    unless `forward` calls it."""
    source = _DECODING_MODEL.replace("{forward}", forward).replace("{name}", name)
    write_project(tmp_path / "proj", {"pyproject.toml": "", "model.py": source})
    assert (("model.py", 15, "PFL214") in _findings(tmp_path / "proj")) is reported
