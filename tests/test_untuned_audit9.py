"""Findings from reading training code nobody had tuned on (rotation U: lit-llama,
pytorch-a2c-ppo-acktr-gail, PyTorch-YOLOv3, semantic-segmentation-pytorch, pycls, stylegan3,
HRNet-Semantic-Segmentation, benchmarking-gnns, tianshou), each with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


# lit-llama's fine-tuning scripts: module-level settings, `log_interval = 1`.
_LORA_SCRIPT = """
    import torch

    eval_interval = 100
    log_interval = {interval}
    {rebind}

    def train(model, optimizer, train_data):
        for iter_num in range(1000):
            input_ids, targets = get_batch(train_data)
            logits = model(input_ids)
            loss = torch.nn.functional.cross_entropy(logits, targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if iter_num % eval_interval == 0:
                print(f"val loss {{loss.item():.4f}}")
            if iter_num % log_interval == 0:
                print(f"iter {{iter_num}}: loss {{loss.item():.4f}}")
"""


def test_a_log_interval_of_one_logs_every_step():
    """`if iter_num % log_interval == 0:` with the module's `log_interval = 1` is true on
    every step: its `.item()` runs every step. The one under `eval_interval = 100` does not."""
    found = _found(_LORA_SCRIPT.format(interval=1, rebind=""))
    assert (18, "PFL201") in found
    assert (16, "PFL201") not in found


def test_an_interval_of_one_written_in_place_logs_every_step():
    source = _LORA_SCRIPT.format(interval=1, rebind="").replace("iter_num % log_interval", "iter_num % 1")
    assert (18, "PFL201") in _found(source)


def test_a_larger_or_rebound_interval_still_throttles():
    assert (18, "PFL201") not in _found(_LORA_SCRIPT.format(interval=10, rebind=""))
    # set again from a configuration: not one known constant
    rebound = _LORA_SCRIPT.format(interval=1, rebind="if config: log_interval = config.log_interval")
    assert (18, "PFL201") not in _found(rebound)
    in_function = _LORA_SCRIPT.format(interval=1, rebind="def configure(n):\n        global log_interval\n"
                                      "        log_interval = n")
    assert not any(code == "PFL201" and row > 16 for row, code in _found(in_function))


# ikostrikov's pytorch-a2c-ppo-acktr-gail: standard distributions subclassed for the policy.
_DISTRIBUTIONS = """
    import torch
    import torch.nn as nn


    class FixedCategorical(torch.distributions.Categorical):
        {init}def sample(self):
            return super().sample().unsqueeze(-1)


    class Categorical(nn.Module):
        def __init__(self, num_inputs, num_outputs):
            super().__init__()
            self.linear = nn.Linear(num_inputs, num_outputs)

        def forward(self, x):
            x = self.linear(x)
            return FixedCategorical(logits=x)
"""


def test_a_subclass_of_a_distribution_validates_like_it():
    found = _found(_DISTRIBUTIONS.format(init=""), "distributions.py")
    assert (17, "PFL227") in found


def test_a_subclass_with_its_own_constructor_is_left_alone():
    """Its `__init__` decides what reaches the library constructor: `validate_args` may not
    even be a parameter."""
    init = "def __init__(self, logits):\n            super().__init__(logits=logits)\n\n        "
    found = _found(_DISTRIBUTIONS.format(init=init), "distributions.py")
    assert not {f for f in found if f[1] == "PFL227"}, found


# The same project's `VecPyTorch`, a baselines `VecEnvWrapper` between the policy and the
# environments: `envs.step(action)` every step calls its `step_async` and `step_wait`.
_VEC_ENV = """
    import torch
    from baselines.common.vec_env import VecEnvWrapper


    class VecPyTorch({base}):
        def __init__(self, venv, device):
            super().__init__(venv)
            self.device = device

        def reset(self):
            obs = self.venv.reset()
            return torch.from_numpy(obs).float().to(self.device)

        def step_async(self, actions):
            actions = actions.cpu().numpy()
            self.venv.step_async(actions)

        def close_all(self, actions):
            return actions.cpu()
"""


def test_a_vectorized_environment_steps_every_step():
    found = _found(_VEC_ENV.format(base="VecEnvWrapper"), "envs.py")
    assert (15, "PFL203") in found
    assert (19, "PFL203") not in found  # not a step method


def test_a_class_that_is_no_environment_is_not_stepped():
    found = _found(_VEC_ENV.format(base="object"), "envs.py")
    assert not {f for f in found if f[1] == "PFL203"}, found


def test_a_gym_observation_wrapper_runs_every_environment_step():
    source = """
        import gym
        import torch


        class ToDevice(gym.ObservationWrapper):
            def observation(self, obs):
                return obs.cuda().float().mean().item()

            def close(self):
                return self.last.cuda().mean().item()
    """
    found = _found(source, "wrappers.py")
    assert (7, "PFL201") in found
    assert (10, "PFL201") not in found


# lit-llama's LoRA layer: a mask made from the weight with `new_zeros(..., dtype=torch.bool)`.
_LORA_LAYER = """
    import torch
    import torch.nn as nn


    class MergedLinear(nn.Linear):
        def __init__(self, in_features, out_features, enable_lora=(False,)):
            nn.Linear.__init__(self, in_features, out_features)
            self.lora_ind = self.weight.new_zeros((out_features,), dtype={dtype}).view(len(enable_lora), -1)
            self.lora_ind[enable_lora, :] = True
            self.lora_ind = self.lora_ind.view(-1)

        def forward(self, x):
            result = x.new_zeros((*x.shape[:-1], self.out_features)).view(-1, self.out_features)
            result[:, self.lora_ind] = x.reshape(-1, 4)
            return result
"""


def test_a_new_tensor_of_bool_dtype_is_a_mask():
    found = _found(_LORA_LAYER.format(dtype="torch.bool"), "lora.py")
    assert (14, "PFL214") in found


def test_a_new_tensor_of_the_receiver_dtype_is_no_mask():
    found = _found(_LORA_LAYER.format(dtype="torch.long"), "lora.py")
    assert not {f for f in found if f[1] == "PFL214"}, found


# PyTorch-YOLOv3: the loss lives in another file and takes the device from its targets.
_YOLO_LOSS = """
    import torch


    def compute_loss(predictions, targets, model):
        device = targets.device
        lcls = torch.zeros(1, device=device)
        for layer_index, ps in enumerate(predictions):
            num_targets = ps.shape[0]
            t = torch.zeros_like(ps[:, 5:], device=device)
            t[range(num_targets), 0] = 1
            lcls += torch.nn.functional.binary_cross_entropy_with_logits(ps[:, 5:], t)
        return lcls
"""
_YOLO_TRAIN = """
    import torch
    from loss import compute_loss


    def run(model, loader, optimizer):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        for imgs, targets in loader:
            imgs = imgs.to(device, non_blocking=True)
            {targets}
            outputs = model(imgs)
            loss = compute_loss(outputs, targets, model)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
"""


def _project_found(tmp_path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    from project_files import project_findings

    return project_findings(tmp_path, files)


def test_an_argument_moved_to_the_device_is_known_there_in_another_file(tmp_path):
    """`targets.to(device)` handed to the loss: the loss's `targets.device` is the
    accelerator, so `t[range(n), 0] = 1` copies the host index there every step."""
    found = _project_found(tmp_path, {"loss.py": _YOLO_LOSS,
                                      "train.py": _YOLO_TRAIN.format(targets="targets = targets.to(device)")})
    assert ("loss.py", 10, "PFL109") in found


def test_an_argument_of_unknown_device_stays_unknown_in_another_file(tmp_path):
    found = _project_found(tmp_path, {"loss.py": _YOLO_LOSS, "train.py": _YOLO_TRAIN.format(targets="pass")})
    assert ("loss.py", 10, "PFL109") not in found


# benchmarking-gnns' pipelines: the epoch function imported on one branch or the other, and
# the loaders built there too, collating differently with the same workers and pinning.
_GNN_STEP = """
    def train_epoch_{kind}(model, optimizer, device, data_loader):
        for batch_x, batch_labels in data_loader:
            batch_x = batch_x{move}
            loss = model(batch_x).sum()
            loss.backward()
            optimizer.step()
"""
_GNN_STEPS = "\n\n".join(_GNN_STEP.replace("{kind}", kind) for kind in ("dense", "sparse"))
_GNN_MAIN = """
    from torch.utils.data import DataLoader


    def pipeline(MODEL_NAME, model, optimizer, dataset, device):
        if MODEL_NAME in ["RingGNN", "3WLGNN"]:
            from train.steps import train_epoch_dense as train_epoch
            train_loader = DataLoader(dataset.train, shuffle=True, collate_fn=dataset.collate_dense_gnn)
        else:
            from train.steps import train_epoch_sparse as train_epoch
            train_loader = DataLoader(dataset.train, batch_size=128, shuffle=True, collate_fn=dataset.collate)
        for epoch in range(100):
            train_epoch(model, optimizer, device, train_loader)
"""


def test_an_epoch_function_imported_on_either_branch_moves_the_loaders_batches(tmp_path):
    found = _project_found(tmp_path, {"train/__init__.py": "", "train/steps.py": _GNN_STEPS.format(move=".to(device)"),
                                      "main.py": _GNN_MAIN})
    assert {("main.py", 7, "PFL104"), ("main.py", 10, "PFL104")} <= found


def test_an_epoch_function_imported_on_either_branch_that_moves_nothing(tmp_path):
    found = _project_found(tmp_path, {"train/__init__.py": "", "train/steps.py": _GNN_STEPS.format(move=".float()"),
                                      "main.py": _GNN_MAIN})
    assert not {f for f in found if f[2] == "PFL104"}, found
