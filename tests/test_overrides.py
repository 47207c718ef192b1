"""A base class's hot code calling a method on `self` runs the overrides that subclasses in
other files define (ZoeDepth's `BaseTrainer.train` calling `self.train_on_batch`), also
through a subclass of a subclass; called once (in `__init__`), it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflint.api import check_paths
from perflint.config import SettingsResolver

from project_files import write_project

BASE = """
    import torch

    class BaseTrainer:
        def __init__(self, model, train_loader, optimizer):
            self.model, self.train_loader, self.optimizer = model, train_loader, optimizer
            {init}

        def train_on_batch(self, batch, step):
            raise NotImplementedError

        def train(self):
            for epoch in range(10):
                for i, batch in enumerate(self.train_loader):
                    {loop}
                    self.optimizer.step()
"""
TRAINER = """
    from .base_trainer import BaseTrainer

    class Trainer(BaseTrainer):
        def train_on_batch(self, batch, step):
            images, depth = batch["image"].cuda(), batch["depth"].cuda()
            pred = self.model(images)
            loss = (pred - depth).abs().mean()
            loss.backward()
            return {"loss": loss.item()}
"""
FINETUNER = """
    from trainers.zoe_trainer import Trainer

    class Finetuner(Trainer):
        def train_on_batch(self, batch, step):
            loss = self.model(batch.cuda()).mean()
            loss.backward()
            print(f"{loss}")
"""


def _project(root: Path, init: str, loop: str) -> None:
    write_project(root, {"trainers/__init__.py": "", "trainers/base_trainer.py": BASE.format(init=init, loop=loop),
                         "trainers/zoe_trainer.py": TRAINER, "finetune.py": FINETUNER, "pyproject.toml": ""})


def found(root: Path, *named: str) -> list[tuple[str, int, str]]:
    report = check_paths([root / n for n in named] or [root], SettingsResolver(root), jobs=1)
    return sorted((Path(d.path).name, d.location.row, d.code) for d in report.diagnostics)


@pytest.mark.parametrize("named", [(), ("trainers/zoe_trainer.py", "finetune.py")])
def test_overrides_in_other_files_run_every_step(tmp_path, named):
    _project(tmp_path, init="pass", loop="losses = self.train_on_batch(batch, i)")
    assert found(tmp_path, *named) == [("finetune.py", 7, "PFL210"), ("zoe_trainer.py", 9, "PFL201")]


def test_an_override_the_base_calls_once_is_not_per_step(tmp_path):
    _project(tmp_path, init="self.train_on_batch(None, 0)", loop="losses = self.model(batch)")
    assert found(tmp_path) == []
