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
