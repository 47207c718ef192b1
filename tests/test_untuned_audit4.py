"""Findings from reading training code nobody had tuned on (rotation H: dino, deit, mae,
swav, DomainBed, minGPT, DiT, dlrm), each with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


_SHOW_MISTAKES = """
    import torch

    def evaluate(model, loader, device):
        correct_total = 0
        shown = 0
        for x, y in loader:
            {reset}pred = model(x.to(device)).argmax(1)
            y = y.to(device)
            correct_total += (pred == y).sum()
            for i in range(x.size(0)):
                if {test}:
                    shown += 1
                    print("predicted %d but it is %d" % (pred[i], y[i]), pred[i].tolist())
        return correct_total
"""


def test_a_block_that_counts_its_own_runs_against_a_small_cap_is_not_per_step():
    """minGPT's evaluation prints the first few mistakes: `if not correct[i] and
    mistakes_printed_already < 5: mistakes_printed_already += 1; print(...)` runs five times
    in all, not every batch."""
    capped = _found(_SHOW_MISTAKES.format(reset="", test="shown < 5"))
    assert not capped
    assert not _found(_SHOW_MISTAKES.format(reset="", test="5 > shown"))


def test_a_cap_that_starts_again_every_step_still_runs_every_step():
    reset_each_batch = _found(_SHOW_MISTAKES.format(reset="shown = 0\n            ", test="shown < 5"))
    assert {(14, "PFL210"), (14, "PFL202")} <= reset_each_batch
    uncapped = _found(_SHOW_MISTAKES.format(reset="", test="shown < 500"))  # not a few
    assert {(13, "PFL210"), (13, "PFL202")} <= uncapped
    not_counted = _found(_SHOW_MISTAKES.format(reset="", test="shown < 5").replace("shown += 1", "pass"))
    assert {(13, "PFL210"), (13, "PFL202")} <= not_counted


_WARN_ONCE = """
    import torch

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)
            self.warned = 0

        def forward(self, x):
            {reset}out = self.proj(x)
            if self.warned < 3:
                self.warned += 1
                print("first batches: output norm", out.norm().item())
            return out
"""


def test_an_attribute_counter_caps_a_block_across_calls():
    assert (13, "PFL201") not in _found(_WARN_ONCE.format(reset=""))
    # reset on every call: the block runs every step
    assert (14, "PFL201") in _found(_WARN_ONCE.format(reset="self.warned = 0\n            "))


_ALGORITHM = """
    import torch
    import torch.nn.functional as F

    ALGORITHMS = {{}}

    class ERM(torch.nn.Module):
        def __init__(self, network, lr):
            super().__init__()
            self.network = network
            self.optimizer = torch.optim.Adam(self.network.parameters(), lr=lr)

        def {name}(self, minibatches):
            all_x = torch.cat([x for x, y in minibatches])
            all_y = torch.cat([y for x, y in minibatches])
            loss = F.cross_entropy(self.network(all_x), all_y)
            self.optimizer.zero_grad()
            {backward}
            self.optimizer.step()
            return {{"loss": loss.item()}}

    def run(name, steps, make_batches, network):
        algorithm = ALGORITHMS[name](network, 1e-3)
        for step in range(steps):
            algorithm.{name}(make_batches())
"""


def test_a_learner_update_that_steps_its_optimizer_is_one_training_step():
    """DomainBed's algorithms are looked up by name (`get_algorithm_class(args.algorithm)`), so
    nothing says what `algorithm.update(minibatches)` in the step loop runs; an `update()`
    (or `learn()`) method that runs the backward pass and steps the optimizer itself is one
    training step, whoever calls it."""
    for name in ("update", "learn", "run_step", "optimize_parameters"):
        found = _found(_ALGORITHM.format(name=name, backward="loss.backward()"))
        assert (19, "PFL201") in found, name


def test_an_update_that_trains_nothing_is_not_a_step():
    """An EMA's or a meter's `update()` runs no backward pass: only hot callers make it hot."""
    assert (19, "PFL201") not in _found(_ALGORITHM.format(name="update", backward="pass").replace(
        "self.optimizer.step()", "self.ema = loss.detach()"))
    # a function of that name outside a class is not a learner's update
    assert not _found("""
        import torch
        def update(model, batch, optimizer):
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()
            return loss.item()
    """)


def test_state_made_when_still_empty_is_made_once():
    """`if not len(self.q): self.q = torch.ones(n).to(device)` (DomainBed's VREx-like
    weights) initialises a buffer on the first step only."""
    found = _found("""
        import torch

        class Reweight(torch.nn.Module):
            def forward(self, losses):
                if not len(self.q):
                    self.q = torch.ones(len(losses)).to("cuda")
                return (self.q * losses).sum() + torch.ones(3).to("cuda")
    """)
    assert (6, "PFL101") not in found
    assert (7, "PFL101") in found  # the twin: made every step


_METRIC_LOGGER = """
    import torch

    class MetricLogger:
        def __init__(self):
            self.meters = {}

        def update(self, **kwargs):
            for k, v in kwargs.items():
                if isinstance(v, torch.Tensor):
                    v = v.item()
                self.meters[k] = v
"""
_ENGINE = """
    import torch
    from utils import MetricLogger

    def train_one_epoch(model, loader, optimizer, device, stats):
        logger = MetricLogger()
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            logger.update({passed})
            logger.update(lr=optimizer.param_groups[0]["lr"])
"""


def _project_found(tmp_path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    from project_files import project_findings

    return project_findings(tmp_path, files)


def test_a_logger_handed_python_values_by_keyword_makes_no_sync(tmp_path):
    """deit, mae and dino's `MetricLogger.update(**kwargs)` converts tensors with `.item()`,
    but every caller passes `loss.item()` and the learning rate: Python values, known across
    files from the call's keyword codes (`update(loss=p)`)."""
    found = _project_found(tmp_path, {"utils.py": _METRIC_LOGGER, "engine.py": _ENGINE.format(passed="loss=loss.item()")})
    assert ("engine.py", 11, "PFL201") in found  # the caller's own sync
    assert ("utils.py", 10, "PFL201") not in found


def test_a_logger_handed_a_tensor_or_an_unknown_mapping_still_syncs(tmp_path):
    for passed in ("loss=loss", "loss=loss.item(), acc=loss.detach()", "**stats"):
        found = _project_found(tmp_path / passed.replace("*", "s").replace("=", "_").replace(",", "")[:10],
                               {"utils.py": _METRIC_LOGGER, "engine.py": _ENGINE.format(passed=passed)})
        assert ("utils.py", 10, "PFL201") in found, passed


def test_keywords_within_one_file_bind_kwargs_too():
    source = _METRIC_LOGGER + """
    def fit(model, loader, optimizer):
        logger = MetricLogger()
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            logger.update(loss=VALUE)
    """
    assert (10, "PFL201") not in _found(source.replace("VALUE", "loss.item()"))
    assert (10, "PFL201") in _found(source.replace("VALUE", "loss"))


def test_a_param_group_holds_settings_and_parameters():
    """`optimizer.param_groups[0]["lr"]` is a Python number; `group["params"]` are tensors."""
    found = _found("""
        import torch

        def fit(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                lr = optimizer.param_groups[0]["lr"]
                print(lr.item())
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        print(p.grad.norm().item())
    """)
    assert (8, "PFL201") not in found
    assert (11, "PFL201") in found


def test_a_parameter_checked_for_a_tensor_is_still_read_as_one():
    """The twin of the logger: a parameter's Python value may be a guess from its name
    (`divisor`), so `if isinstance(divisor, torch.Tensor): int(divisor.max())` still syncs
    (yolov9's `make_divisible(x, self.stride)` given the model's stride tensor)."""
    found = _found("""
        import math
        import torch

        def make_divisible(x, divisor):
            if isinstance(divisor, torch.Tensor):
                divisor = int(divisor.max())
            return math.ceil(x / divisor) * divisor

        class Shape(torch.nn.Module):
            def forward(self, x):
                return make_divisible(x.shape[-1], self.stride)
    """)
    assert (6, "PFL204") in found


_POLICY_SCRIPT = """
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributions import Categorical

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine = nn.Linear(4, 128)
            self.head = nn.Linear(128, 2)

        def forward(self, x):
            x = F.relu(self.affine(x))
            return F.softmax(self.head(x), dim=-1), x

    model = Policy()

    def select_action(state):
        state = torch.from_numpy(state).float()MOVE
        probs, features = model(state)
        m = Categorical(probs)
        action = m.sample()
        return action.item()

    for episode in range(100):
        state = np.zeros(4)
        for t in range(1000):
            action = select_action(state)
"""


def test_a_cpu_only_policy_samples_on_the_cpu():
    """pytorch/examples' reinforcement_learning scripts never mention a device: the model's
    tuple of outputs, the `Categorical` built from them and its samples are on the CPU."""
    assert not _found(_POLICY_SCRIPT.replace("MOVE", ""))


def test_a_policy_on_the_gpu_still_syncs_when_it_samples():
    found = _found(_POLICY_SCRIPT.replace("MOVE", ".cuda()"))
    assert {(22, "PFL227"), (24, "PFL201")} <= found


def test_a_helper_with_a_comprehension_keeps_its_arguments_device():
    """pytorch/examples' regression script: `make_features(x)` returns `torch.cat([x ** i for i
    in range(1, 5)], 1)`; given a CPU tensor in a file that never mentions an accelerator,
    it is a CPU tensor, and so is the loss computed from it."""
    source = """
        import torch
        import torch.nn.functional as F

        def make_features(x):
            x = x.unsqueeze(1)
            return torch.cat([x ** i for i in range(1, 5)], 1)

        fc = torch.nn.Linear(4, 1)
        for step in range(100):
            batch_x = make_features(torch.randn(32)MOVE)
            output = F.smooth_l1_loss(fc(batch_x), batch_x[:, :1])
            loss = output.item()
            output.backward()
    """
    assert not _found(source.replace("MOVE", ""))
    assert (12, "PFL201") in _found(source.replace("MOVE", ".cuda()"))  # the GPU twin
