"""Findings from reading reinforcement-learning code nobody had tuned on (rotation J:
cleanrl, spinningup) and the H200 run of 2026-11-27, each with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


_AGENT = """
    import torch
    import torch.nn as nn


    class Agent(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.actor = nn.Linear(n, n)

        def act(self, x):
            logits = self.actor(x)
            return logits.argmax(-1).item()


    device = torch.device("cuda")
    agent = {build}
    optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
    obs = torch.zeros(4, 3, device=device)
    for epoch in range(100):
        {call_in_loop}
        loss = agent.actor(obs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    {call_after}
"""


def test_a_module_moved_with_to_keeps_its_class_so_its_methods_are_known():
    """cleanrl: `agent = Agent(envs).to(device)`, then `agent.get_action_and_value(obs)` every
    step. `.to()` (and `.cuda()`, `.train()`, `.eval()`, ...) returns the module itself, so its
    own methods are the ones that run."""
    for build in ("Agent(3).to(device)", "Agent(3).cuda().train()", "Agent(3).to(device).eval()"):
        found = _found(_AGENT.format(build=build, call_in_loop="agent.act(obs)", call_after=""))
        assert (12, "PFL201") in found, build


def test_a_moved_module_method_called_once_after_training_stays_silent():
    found = _found(_AGENT.format(build="Agent(3).to(device)", call_in_loop="", call_after="agent.act(obs)"))
    assert (12, "PFL201") not in found


_POLICY = """
    import torch
    import torch.nn as nn
    from torch.distributions import Independent, Normal


    class Policy(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.mean = nn.Linear(n, n)
            self.log_std = nn.Parameter(torch.zeros(1, n))

        def step(self, x):
            mu = self.mean(x)
            dist = {dist}
            return dist.sample()


    device = torch.device("cuda")
    policy = Policy(3).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)
    obs = torch.zeros(4, 3, device=device)
    for epoch in range(100):
        action = policy.step(obs)
        loss = policy.mean(obs).sub(action).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_sampling_a_normal_of_device_tensors_is_reported():
    """`Normal(mu, std).sample()` is `torch.normal(loc, scale)`: its std >= 0 check synced on
    the H200 with `validate_args=False` too; a number scale becomes a tensor beside `loc`."""
    for dist in ("Normal(mu, self.log_std.exp(), validate_args=False)",
                 "Normal(mu, 0.2, validate_args=False)",
                 "Independent(Normal(mu, 0.2, validate_args=False), 1)",
                 "torch.distributions.LogNormal(mu, 0.2, validate_args=False)"):
        assert (15, "PFL223") in _found(_POLICY.format(dist=dist)), dist


def test_sampling_what_never_calls_torch_normal_on_device_tensors_is_not():
    for dist in ("Normal(0.0, 1.0, validate_args=False)",
                 "Normal(torch.zeros(3), torch.ones(3), validate_args=False)",
                 "torch.distributions.Categorical(logits=mu, validate_args=False)",
                 "torch.distributions.Uniform(mu, mu + 1, validate_args=False)"):
        assert (15, "PFL223") not in _found(_POLICY.format(dist=dist)), dist


_ROLLOUT = """
    import numpy as np
    import torch

    device = torch.device("cuda")
    model = torch.nn.Linear(4, 2).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    next_obs = {first}
    for step in range(1000):
        with torch.no_grad():
            action = model(next_obs).argmax(-1)
        obs = env_step(action.cpu().numpy())
        next_obs = {convert}
        loss = model(next_obs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_legacy_constructor_of_environment_data_moved_every_step_is_reported():
    """cleanrl: `next_obs = torch.Tensor(next_obs).to(device)` after every environment step:
    the legacy constructor builds on the host, whatever it is given (NumPy data here)."""
    for convert in ("torch.Tensor(obs).to(device)", "torch.FloatTensor(obs).cuda()"):
        found = _found(_ROLLOUT.format(first="torch.zeros(8, 4, device=device)", convert=convert))
        assert (12, "PFL101") in found, convert


def test_a_legacy_constructor_moved_once_or_of_a_device_tensor_is_not():
    once = _found(_ROLLOUT.format(first="torch.Tensor(np.zeros((8, 4))).to(device)", convert="next_obs + 1"))
    assert not any(code == "PFL101" for _, code in once)
    on_device = _found(_ROLLOUT.format(first="torch.zeros(8, 4, device=device)",
                                       convert="torch.Tensor(next_obs * 2).to(device)"))
    assert (12, "PFL101") not in on_device


_CPU_POLICY = """
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributions import Normal


    class PPO(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(3, 128)
            self.fc_mu = nn.Linear(128, 1)
            self.fc_std = nn.Linear(128, 1)

        def pi(self, x):
            x = F.relu(self.fc1(x))
            return 2.0 * torch.tanh(self.fc_mu(x)), F.softplus(self.fc_std(x))


    model = PPO(){move_model}
    optimizer = torch.optim.Adam(model.parameters())
    for episode in range(10000):
        s = np.zeros(3, dtype=np.float32)
        for t in range(20):
            mu, std = model.pi(torch.from_numpy(s).float(){move_input})
            log_prob = Normal(mu, std, validate_args=False).sample()
            loss = -log_prob.sum() + mu.pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
"""


def test_a_method_returning_a_tuple_of_what_a_cpu_input_gives_stays_on_the_cpu():
    """minimalRL's PPO: `mu, std = model.pi(torch.from_numpy(s).float())` in a file that
    never mentions an accelerator returns CPU tensors; sampling and `.item()` wait for no GPU.
    The twin moves the model and its input to the GPU."""
    assert not _found(_CPU_POLICY.format(move_model="", move_input=""))
    on_gpu = _found(_CPU_POLICY.format(move_model='.to("cuda")', move_input='.to("cuda")'))
    assert {(26, "PFL223"), (31, "PFL201")} <= on_gpu


_NUMPY_STEP = """
    import numpy as np
    import torch

    device = torch.device("cuda")
    model = torch.nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    table = np.linspace(0, 1, 1000)
    {before}
    for step in range(100):
        idx_np = np.random.choice(1000, size=(8,))
        {line}
        loss = model(torch.randn(8, 4, device=device)).sum() * w.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_numpy_data_copied_to_the_device_every_step_is_reported():
    """guided-diffusion's timestep sampler (`th.from_numpy(indices_np).long().to(device)`)
    and its table lookup (`th.from_numpy(arr).to(device=t.device)[t]`), stable-baselines3's
    `th.as_tensor(obs, device=device)` of a NumPy observation: blocking copies from pageable
    memory every step."""
    for line in ("w = torch.from_numpy(idx_np).long().to(device)",
                 "w = torch.from_numpy(table).to(device=device)[torch.zeros(8, dtype=torch.long, device=device)]",
                 "w = torch.as_tensor(idx_np, device=device)",
                 "w = torch.tensor(np.random.rand(8), device=device)"):
        found = _found(_NUMPY_STEP.format(before="", line=line))
        assert (11, "PFL101") in found, line


def test_numpy_data_copied_once_or_kept_on_the_host_is_not():
    once = _found(_NUMPY_STEP.format(before="w = torch.from_numpy(table).to(device)", line="pass"))
    assert not any(code == "PFL101" for _, code in once)
    host = _found(_NUMPY_STEP.format(before="", line="w = torch.from_numpy(idx_np).long()"))
    assert not any(code == "PFL101" for _, code in host)


_CONTRASTIVE = """
    import torch
    import torch.nn as nn


    class MoCo(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = nn.Linear(4, 4)

        def forward(self, q, k):
            logits = self.base(q) @ self.base(k).T
            n = logits.shape[0]
            labels = {labels}
            return nn.functional.cross_entropy(logits, labels)
"""


def test_a_factory_offset_by_the_rank_then_moved_is_reported():
    """moco-v3: `(torch.arange(N, dtype=torch.long) + N * torch.distributed.get_rank()).cuda()`
    every step; the rank is a Python number."""
    found = _found(_CONTRASTIVE.format(
        labels="(torch.arange(n, dtype=torch.long) + n * torch.distributed.get_rank()).cuda()"))
    assert (13, "PFL101") in found
    twin = _found(_CONTRASTIVE.format(
        labels="torch.arange(n, dtype=torch.long, device=logits.device) + n * torch.distributed.get_rank()"))
    assert (13, "PFL101") not in twin


_DDP_STEP = """
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader


    def main():
        dist.init_process_group("nccl")
        rank = dist.get_rank()
        device = {device}
        model = Net().to(device)
        optimizer = torch.optim.AdamW(model.parameters())
        loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
        for x, y in loader:
            x = x.to(device)
            loss = model(x, y).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_device_index_computed_from_the_rank_is_a_device():
    """DiT: `device = rank % torch.cuda.device_count()` (a Python int, now that the rank is
    known to be one) and `x.to(device)` of a pinned batch: still a blocking batch copy."""
    for device in ("rank % torch.cuda.device_count()", "dist.get_rank()", '"cuda"'):
        assert (14, "PFL105") in _found(_DDP_STEP.format(device=device)), device
    assert (14, "PFL105") not in _found(_DDP_STEP.format(device='"cpu"'))


def test_a_python_value_named_like_a_dtype_is_not_a_device():
    """transformers' MoE routers: `self.dtype = getattr(torch, config.router_dtype)`, then
    `self.classifier = self.classifier.to(self.dtype)` every step is a cast, not a move."""
    source = """
        import torch
        import torch.nn as nn


        class Router(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.classifier = nn.Linear(4, 4)
                self.dtype = getattr(torch, config.router_dtype)

            def forward(self, x):
                self.classifier = self.classifier.to(self.dtype)
                {extra}
                return self.classifier(x)
    """
    assert not any(code == "PFL107" for _, code in _found(source.format(extra="")))
    moved = _found(source.format(extra="self.classifier = self.classifier.to(torch.distributed.get_rank())"))
    assert (13, "PFL107") in moved


_REPLAY = """
    import numpy as np
    import torch
    from torch.optim import Adam


    class ReplayBuffer:
        def __init__(self, size):
            self.obs_buf = np.zeros((size, 3), dtype=np.float32)
            self.rew_buf = np.zeros(size, dtype=np.float32)

        def sample_batch(self, batch_size=32):
            idxs = np.random.randint(0, 10, size=batch_size)
            batch = dict(obs=self.obs_buf[idxs], rew=self.rew_buf[idxs])
            return {{k: torch.as_tensor(v, dtype=torch.float32{device}) for k, v in batch.items()}}


    def sac(actor_critic, steps=1000):
        ac = actor_critic()
        q_optimizer = Adam(ac.q1.parameters(), lr=1e-3)
        replay_buffer = ReplayBuffer(1000)

        def compute_loss_q(data):
            o, r = data["obs"], data["rew"]
            return ((ac.q1(o) - r) ** 2).mean()

        def update(data):
            q_optimizer.zero_grad()
            loss_q = compute_loss_q(data)
            loss_q.backward()
            q_optimizer.step()
            print(loss_q.item())

        for t in range(steps):
            update(data=replay_buffer.sample_batch(32))
"""


def test_a_dict_of_host_tensors_passed_to_a_small_helper_keeps_its_device():
    """spinningup's SAC: the replay buffer's batch is a dict of `torch.as_tensor(v)` (CPU
    tensors); the loss a nested helper computes from it stays on the CPU. The twin builds the
    batch on the GPU."""
    assert (31, "PFL201") not in _found(_REPLAY.format(device=""))
    assert (31, "PFL201") in _found(_REPLAY.format(device=', device="cuda"'))


_DEPTH_TEST = """
    import torch
    import torch.nn as nn


    class Depther(nn.Module):
        def inference(self, img, {meta}, rescale):
            depth_pred = self.backbone(img)
            flip = {meta}[0]["flip"]
            if flip:
                depth_pred = depth_pred.flip(dims=(3,))
            return depth_pred

        def forward(self, img, {meta}):
            return self.inference(img, {meta}, True)
"""


def test_metadata_parameters_are_python_values():
    """dinov2's depth heads (mmseg style): `flip = img_meta[0]["flip"]; if flip:` reads a
    Python bool from the image metadata. The twin reads the same from a tensor parameter."""
    for meta in ("img_meta", "img_metas", "meta", "infos"):
        assert (9, "PFL206") not in _found(_DEPTH_TEST.format(meta=meta)), meta
    assert (9, "PFL206") in _found(_DEPTH_TEST.format(meta="flags"))
