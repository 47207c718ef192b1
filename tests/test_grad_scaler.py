"""PFL230 grad-scaler-step-sync: the shapes real training code steps a GradScaler in, and
their negative twins (a fused optimizer, a scaler that waits for no GPU, not a scaler)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from perflint.api import check_paths, check_source
from perflint.config import SettingsResolver

from project_files import write_project

CODE = "PFL230"


def rows(source: str) -> list[int]:
    found = check_source(textwrap.dedent(source).lstrip(), "train.py", select=[CODE])
    return sorted(d.location.row for d in found if d.code == CODE)


TRAINER = """
    import torch

    class Trainer:
        def __init__(self, args, model):
            self.model = model
            self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3{fused})
            self.scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)

        def train_one_iter(self, batch):
            with torch.autocast("cuda", dtype=torch.float16, enabled=self.args.fp16):
                loss = self.model(batch)
            self.optimizer.zero_grad()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()

        def train(self):
            for batch in self.loader:
                self.train_one_iter(batch)
"""


def test_self_scaler_with_the_optimizer_an_attribute_holds():
    assert rows(TRAINER.format(fused="")) == [14]
    assert rows(TRAINER.format(fused=", fused=False")) == [14]


def test_self_scaler_with_a_fused_optimizer_in_an_attribute_is_silent():
    assert rows(TRAINER.format(fused=", fused=True")) == []


PARAMETER = """
    import torch

    def train_one_epoch(model, loader, optimizer, scaler):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x, y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    def main(model, loader, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1{fused})
        scaler = torch.cuda.amp.GradScaler({enabled})
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer, scaler)
"""


def test_scaler_and_optimizer_passed_as_parameters():
    assert rows(PARAMETER.format(fused="", enabled="enabled=args.amp")) == [9]


def test_parameters_bound_to_a_fused_optimizer_or_a_disabled_scaler_are_silent():
    assert rows(PARAMETER.format(fused=", fused=True", enabled="enabled=args.amp")) == []
    assert rows(PARAMETER.format(fused="", enabled="enabled=False")) == []
    assert rows(PARAMETER.format(fused="", enabled="65536.0, 2.0, 0.5, 2000, False")) == []


def test_unknown_parameters_are_reported_by_the_scaler_name_only():
    source = """
        import torch

        def train_step(model, batch, optimizer, grad_scaler, stepper):
            loss = model(batch)
            grad_scaler.scale(loss).backward()
            grad_scaler.step(optimizer)
            stepper.step(optimizer)
            grad_scaler.update()

        for batch in loader:
            train_step(model, batch, optimizer, grad_scaler, stepper)
    """
    assert rows(source) == [6]


def test_scalers_that_are_not_gradient_scalers_are_silent():
    source = """
        import torch
        from sklearn.preprocessing import StandardScaler
        from mylib import LossScaler

        class EmaScaler:
            def step(self, value):
                self.value = value

        norm_scaler = StandardScaler()
        ema_scaler = EmaScaler()
        loss_scaler = LossScaler()
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            ema_scaler.step(optimizer)
            loss_scaler.step(optimizer)
            norm_scaler.step(optimizer)
    """
    assert rows(source) == []


def test_imported_grad_scaler_subclasses_and_cuda_scalers_are_reported():
    source = """
        import torch
        from fairscale.optim.grad_scaler import ShardedGradScaler
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler as TorchSharded

        a = ShardedGradScaler()
        b = TorchSharded()
        c = torch.amp.GradScaler("cpu")
        d = torch.cpu.amp.GradScaler()
        for x, y in loader:
            loss = model(x, y)
            a.scale(loss).backward()
            a.step(optimizer)
            b.step(optimizer)
            c.step(optimizer)
            d.step(optimizer)
            a.update()
    """
    assert rows(source) == [12, 13]


def test_get_scale_only_when_it_runs_every_step():
    source = """
        import torch

        scaler = torch.amp.GradScaler("cuda")
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        for step, (x, y) in enumerate(loader):
            loss = model(x, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            writer.add_scalar("scale", scaler.get_scale(), step)
            if step % 100 == 0:
                print(scaler.get_scale())
        torch.save({"scaler": scaler.state_dict()}, "ckpt.pt")
    """
    assert rows(source) == [10]


write = write_project


WRAPPER = {
    "pyproject.toml": "",
    "utils.py": """
        import torch

        class NativeScaler:
            def __init__(self):
                self._scaler = torch.cuda.amp.GradScaler()

            def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
                self._scaler.scale(loss).backward()
                if clip_grad is not None:
                    self._scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                self._scaler.step(optimizer)
                self._scaler.update()
    """,
}


def test_a_wrapper_in_another_file_called_from_the_training_loop(tmp_path):
    write(tmp_path, WRAPPER | {"engine.py": """
        from utils import NativeScaler

        def train_one_epoch(model, loader, optimizer, loss_scaler):
            for x, y in loader:
                loss = model(x, y)
                optimizer.zero_grad()
                loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())

        def main(model, loader, optimizer, epochs):
            loss_scaler = NativeScaler()
            for epoch in range(epochs):
                train_one_epoch(model, loader, optimizer, loss_scaler)
    """})
    for select in (CODE, "PFL2"):  # engine.py names no `.step(`: it must still be walked
        (tmp_path / "pyproject.toml").write_text(f'[tool.perflint]\nselect = ["{select}"]\n', encoding="utf-8")
        report = check_paths([tmp_path], SettingsResolver(tmp_path), jobs=1)
        assert [(Path(d.path).name, d.location.row) for d in report.diagnostics if d.code == CODE] == [("utils.py", 12)]


def test_a_wrapper_nobody_calls_every_step_is_silent(tmp_path):
    write(tmp_path, WRAPPER | {"engine.py": """
        from utils import NativeScaler

        def warmup(model, batch, optimizer):
            loss_scaler = NativeScaler()
            loss_scaler(model(batch).mean(), optimizer)
    """})
    report = check_paths([tmp_path], SettingsResolver(tmp_path), jobs=1)
    assert [d for d in report.diagnostics if d.code == CODE] == []


SAM2_OPTIMIZER = """
    class Optimizer:
        def __init__(self, optimizer, schedulers=None):
            self.optimizer = optimizer
            self.schedulers = schedulers


    def construct_optimizer(model, optimizer_conf):
        optimizer = instantiate(optimizer_conf, model.parameters())
        return Optimizer(optimizer)
"""
SAM2_TRAINER = """
    import torch
    from optimizer import construct_optimizer

    class Trainer:
        def __init__(self, model, optim_conf):
            self.model = model
            self.scaler = torch.amp.GradScaler("cuda", enabled=True)
            self.optim = construct_optimizer(self.model, optim_conf)

        def train_epoch(self, loader):
            for data_iter, batch in enumerate(loader):
                loss = self.model(batch.cuda()).mean()
                self.scaler.scale(loss).backward()
                self.scaler.step({optimizer})
                self.scaler.update()
"""


def test_the_optimizer_held_by_a_wrapper_of_another_file_is_stepped_with_the_check(tmp_path):
    """sam2's trainer: `self.scaler.step(self.optim.optimizer)`, the optimizer a project
    wrapper keeps; what crosses the file boundary says nothing against it being one."""
    write_project(tmp_path, {"optimizer.py": SAM2_OPTIMIZER, "pyproject.toml": "",
                             "train.py": SAM2_TRAINER.format(optimizer="self.optim.optimizer")})
    report = check_paths([tmp_path], SettingsResolver(tmp_path), jobs=1)
    assert [(Path(d.path).name, d.location.row) for d in report.diagnostics if d.code == CODE] == [("train.py", 14)]


def test_a_scaler_stepping_a_known_module_is_not_a_grad_scaler_step(tmp_path):
    """The twin: what is known not to be an optimizer (the model) is not stepped by a scaler."""
    write_project(tmp_path, {"optimizer.py": SAM2_OPTIMIZER, "pyproject.toml": "",
                             "train.py": SAM2_TRAINER.format(optimizer="self.model")})
    report = check_paths([tmp_path], SettingsResolver(tmp_path), jobs=1)
    assert [d for d in report.diagnostics if d.code == CODE] == []
