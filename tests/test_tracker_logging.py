"""PFL231 tensor-logged-to-tracker: tensors handed to TensorBoard or W&B every step, in the
shapes training code logs them, and their negative twins."""

from __future__ import annotations

import textwrap
from pathlib import Path

from perflint.api import check_paths, check_source
from perflint.config import SettingsResolver

from project_files import write_project

CODE = "PFL231"


def rows(source: str) -> list[int]:
    found = check_source(textwrap.dedent(source).lstrip(), "train.py", select=[CODE])
    return sorted(d.location.row for d in found if d.code == CODE)


def test_wandb_dict_call_and_tensorboard_dicts():
    assert rows("""
        import torch
        import wandb as wb

        def train(model, loader, optimizer, writer, device):
            for step, (x, y) in enumerate(loader):
                x, y = x.to(device), y.to(device)
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                wb.log(dict(loss=loss, epoch=1))
                writer.add_scalars("loss", {"train": loss.detach()}, step)
                wb.log({"lr": 0.1, "loss_value": loss.item()})
    """) == [10, 11]


def test_logged_only_on_some_steps_or_after_training_is_silent():
    assert rows("""
        import torch
        import wandb

        def train(model, loader, optimizer, writer, device):
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                if (step + 1) % 50 == 0:
                    writer.add_scalar("loss", loss, step)
                if step % 50 == 49:
                    wandb.log({"loss": loss})
            writer.add_scalar("final_loss", loss, step)
    """) == []


def _write(root: Path, files: dict[str, str]) -> None:
    write_project(root, {**files, "pyproject.toml": f'[tool.perflint]\nselect = ["{CODE}"]\n'})


HELPER = """
    def log_scalars(writer, metrics, step):
        for name, value in metrics.items():
            writer.add_scalar(name, value, step)

    def log_loss(writer, loss, step):
        writer.add_scalar("train/loss", loss, step)
"""


def test_a_logging_helper_in_another_file_called_every_step(tmp_path):
    _write(tmp_path, {"logs.py": HELPER, "train.py": """
        import torch
        from logs import log_loss

        def train(model, loader, optimizer, writer):
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                log_loss(writer, loss, step)
    """})
    report = check_paths([tmp_path / "logs.py"], SettingsResolver(tmp_path), jobs=1)
    assert [(Path(d.path).name, d.location.row) for d in report.diagnostics] == [("logs.py", 6)]


def test_the_same_helper_called_once_after_training_is_silent(tmp_path):
    _write(tmp_path, {"logs.py": HELPER, "train.py": """
        import torch
        from logs import log_loss

        def train(model, loader, optimizer, writer):
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            log_loss(writer, loss, step)
    """})
    report = check_paths([tmp_path], SettingsResolver(tmp_path), jobs=1)
    assert report.diagnostics == []
