"""Findings from reading training code nobody had tuned on (rotation W: sd-scripts,
Time-Series-Library, pytorch-retinanet, pytorch-soft-actor-critic, RepDistiller, SupContrast,
attention-is-all-you-need-pytorch, DeepLabV3Plus-Pytorch, ssd.pytorch, drqv2), each with its
twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


def _row(source: str, text: str) -> int:
    return next(n for n, line in enumerate(textwrap.dedent(source).lstrip().splitlines(), 1) if text in line)


# sd-scripts' `sample_images`, called after every optimizer step: it leaves at once unless
# this is the first step and sampling at first was asked for, or the step (epoch) is due.
_SAMPLER = """
    import torch

    def sample_images(args, epoch, steps, vae, latents):
        {guard}
        vae.to("cuda")
        image = vae.decode(latents)
        return image.cpu()

    def train(args, model, vae, loader, optimizer):
        model.cuda()
        for step, batch in enumerate(loader):
            loss = model(batch.cuda()).mean()
            loss.backward()
            optimizer.step()
            sample_images(args, None, step, vae, loss)
"""

_DUE_OR_FIRST = """if steps == 0:
            if not args.sample_at_first:
                return
        else:
            if args.sample_every_n_steps is None and args.sample_every_n_epochs is None:
                return
            if args.sample_every_n_epochs is not None:
                if epoch is None or epoch % args.sample_every_n_epochs != 0:
                    return
            else:
                if steps % args.sample_every_n_steps != 0 or epoch is not None:
                    return"""


def test_a_sampler_that_leaves_unless_due_or_first_is_not_per_step():
    """Both branches of the guard let the rest through only on a due step (or the first):
    the module moves and the copy after it are not per step."""
    source = _SAMPLER.format(guard=_DUE_OR_FIRST)
    assert _sampler_findings(source) == set()


def test_any_reason_to_leave_is_enough():
    """`if steps % n != 0 or epoch is not None: return` throttles like `if steps % n: return`."""
    source = _SAMPLER.format(guard="if steps % args.every != 0 or epoch is not None:\n            return")
    assert _sampler_findings(source) == set()


def test_a_guard_with_a_branch_that_always_continues_is_no_throttle():
    """Twins: a branch that goes on whatever the step (a flag, a test on a rank, `epoch == 0`
    for a whole epoch) leaves the rest per step."""
    for first in ("if args.sample_every_step:", "if rank == 0:", "if epoch == 0:"):
        source = _SAMPLER.format(guard=_DUE_OR_FIRST.replace("if steps == 0:", first))
        assert _sampler_findings(source) == {"PFL107", "PFL203"}, first
    # the due branch itself must throttle: a plain early return on a setting does not
    guard = "if steps == 0:\n            return\n        else:\n            if args.skip:\n                return"
    assert _sampler_findings(_SAMPLER.format(guard=guard)) == {"PFL107", "PFL203"}


def _sampler_findings(source: str) -> set[str]:
    """The codes reported in `sample_images` after its guard: the module move and the copy."""
    first, last = _row(source, 'vae.to("cuda")'), _row(source, "image.cpu()")
    return {code for row, code in _found(source) if first <= row <= last}


# pytorch_wavelets' filter banks (vendored by Time-Series-Library): a helper that builds its
# filters on the device unless it is given tensors, called from an autograd Function with
# the tensors it saved.
_FILTER_BANK = """
    import numpy as np
    import torch

    def sfb1d(lo, hi, g0, g1):
        if not isinstance(g0, torch.Tensor):
            g0 = torch.tensor(np.copy(np.array(g0).ravel()), dtype=torch.float, device=lo.device)
        return torch.nn.functional.conv_transpose2d(lo, g0) + hi

    class SFB1D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, low, high, g0, g1):
            ctx.save_for_backward(g0, g1)
            return sfb1d(low[:, :, None, :], high, g0[:, :, None, :], g1)

        @staticmethod
        def backward(ctx, dy):
            g0, g1 = ctx.saved_tensors
            {rebind}
            return sfb1d(dy[:, :, None, :], dy, g0, g1), None, None, None
"""


def test_a_tensor_check_on_tensors_every_caller_passes_is_decided():
    """`ctx.saved_tensors` are tensors, and so is `g0[:, :, None, :]`: the helper's
    `not isinstance(g0, torch.Tensor)` branch never runs."""
    assert (6, "PFL101") not in _found(_FILTER_BANK.format(rebind=""))


def test_a_tensor_check_on_a_list_some_caller_passes_still_reports():
    """Twin: one caller passes a list of filter taps; the branch builds them every step."""
    assert (6, "PFL101") in _found(_FILTER_BANK.format(rebind="g0 = [0.5, 0.5]"))


# stylegan2-pytorch's non-leaking augmentation: samplers whose `device="cpu"` default no
# caller overrides build their draws on the host, and the matrices filled from them too.
_AUGMENT = """
    import torch

    def normal_sample(size, mean=0, std=1, device="cpu"):
        return torch.empty(size, device=device).normal_(mean, std)

    def scale3d_mat(s_x, s_y, s_z):
        mat = torch.eye(4).unsqueeze(0).repeat(s_x.shape[0], 1, 1)
        mat[:, 0, 0] = s_x
        return mat

    def sample_color(size, device, images):
        param = {param}
        return scale3d_mat(param, param, param)

    for real_img in loader:
        real_img = real_img.cuda()
        color = sample_color(real_img.shape[0], real_img.device, real_img)
        loss = model(real_img, color.to(real_img)).mean()
        loss.backward()
"""


def test_a_device_default_no_caller_overrides_is_the_host():
    """`device="cpu"` by default: the draws and the matrix are on the host, and writing one
    into the other copies nothing between devices."""
    assert not {code for row, code in _found(_AUGMENT.format(param="normal_sample(size, std=0.2)")) if row == 8}


def test_a_device_tensor_written_into_a_host_tensor_is_a_copy_to_the_host():
    """Twin: the scales come from the images, on the device; `mat[:, 0, 0] = s_x` copies
    them into the host matrix (cleanrl's ppo_trxl fills its host rollout buffers from device
    observations the same way)."""
    assert (8, "PFL203") in _found(_AUGMENT.format(param="images.mean((1, 2, 3))"))


# drqv2's agent: `update()` updates every `update_every_steps` environment steps, and what
# follows its guard is the training step itself (the optimizer steps in a method it calls).
_AGENT = """
    import torch
    import torch.nn.functional as F

    class Agent:
        def update_critic(self, obs, reward):
            critic_loss = F.mse_loss(self.critic(obs), reward)
            {train}
            return {{"critic_loss": critic_loss.item()}}

        def update(self, replay_iter, step):
            if step % self.update_every_steps != 0:
                return {{}}
            obs, reward = [torch.as_tensor(x, device=self.device) for x in next(replay_iter)]
            metrics = {{"batch_reward": reward.mean().item()}}
            metrics.update(self.update_critic(obs, reward))
            return metrics
"""


def test_a_gated_training_step_is_per_step_code():
    found = _found(_AGENT.format(train="critic_loss.backward()\n            self.critic_opt.step()"))
    assert {(9, "PFL201"), (15, "PFL201")} <= found


def test_a_gated_method_that_does_not_train_is_not():
    """Twin: the same guard before evaluation code (no backward, no optimizer step)."""
    found = _found(_AGENT.format(train="pass"))
    assert not {code for row, code in found if row in (9, 15)}


# open_clip's `build_zero_shot_classifier(..., device="cpu")`, called from another module
# with `device=args.device`; trl's `get_global_statistics(..., device="cpu")`, called in its
# own file without one.
_CLASSIFIER = """
    import torch

    def build_classifier(model, tokenizer, classnames, device="cpu"):
        weights = []
        with torch.no_grad():
            for classname in classnames:
                texts = tokenizer([classname]).to(device)
                weights.append(model(text=texts).mean(0))
        return torch.stack(weights)
"""


def test_a_device_default_another_module_may_override_is_not_the_host(tmp_path):
    from project_files import project_findings

    found = project_findings(tmp_path, {
        "classifier.py": _CLASSIFIER,
        "zero_shot.py": """
            from classifier import build_classifier

            def zero_shot_eval(model, tokenizer, classnames, args):
                return build_classifier(model, tokenizer, classnames, device=args.device)
        """,
    })
    assert ("classifier.py", 7, "PFL203") not in found


def test_a_device_default_no_call_of_the_file_overrides_is_the_host():
    """Twin: every call is in this file and leaves `device` at "cpu": the statistics are
    copied to the host every step."""
    found = _found("""
        import torch

        def global_statistics(xs, device="cpu"):
            xs = xs.to("cuda")
            mean, var = xs.mean(), xs.var()
            return mean.to(device), var.to(device)

        class RunningMoments:
            def update(self, xs):
                return global_statistics(xs)

        moments = RunningMoments()
        for batch in loader:
            loss = model(batch.cuda()).mean()
            loss.backward()
            moments.update(loss.detach())
    """)
    assert (6, "PFL203") in found


# pytorch-soft-actor-critic: `update_parameters` (another module) returns `.item()` values,
# which the loop logs under names that read like losses.
_SAC = """
    import torch
    import torch.nn.functional as F

    class SAC:
        def update_parameters(self, memory, batch_size):
            state = torch.as_tensor(memory.sample(batch_size), device="cuda")
            qf1_loss = F.mse_loss(self.critic(state), state)
            qf1_loss.backward()
            self.critic_optim.step()
            return {returned}
"""

_SAC_MAIN = """
    from sac import SAC
    from torch.utils.tensorboard import SummaryWriter

    agent = SAC()
    writer = SummaryWriter()
    for updates in range(1000):
        critic_1_loss, policy_loss = agent.update_parameters(memory, 256)
        writer.add_scalar("loss/critic_1", critic_1_loss, updates)
"""


def test_numbers_another_module_returns_are_not_tensors(tmp_path):
    from project_files import project_findings

    found = project_findings(tmp_path, {"sac.py": _SAC.format(returned="qf1_loss.item(), 0.0"), "main.py": _SAC_MAIN})
    assert ("main.py", 8, "PFL231") not in found
    assert ("sac.py", 10, "PFL201") in found


def test_tensors_another_module_returns_are_still_logged_as_tensors(tmp_path):
    """Twin: the losses returned as tensors; logging one reads it to the host."""
    from project_files import project_findings

    found = project_findings(tmp_path, {"sac.py": _SAC.format(returned="qf1_loss, qf1_loss"), "main.py": _SAC_MAIN})
    assert ("main.py", 8, "PFL231") in found


# vicreg's training loop logs when a minute has passed since it last did.
_TIMED_LOG = """
    import time
    import torch

    last_logging = time.time()
    for step, (x, y) in enumerate(loader):
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()
        current_time = time.time()
        if {test}:
            print(loss.item())
            last_logging = current_time
"""


def test_a_block_run_when_time_has_passed_since_it_last_ran_is_throttled():
    found = _found(_TIMED_LOG.format(test="args.rank == 0 and current_time - last_logging > args.log_freq_time"))
    assert (11, "PFL201") not in found


def test_a_difference_of_values_that_are_not_times_is_no_throttle():
    """Twin: `loss - last_loss > tol` compares losses (and syncs itself); the block runs
    whenever it holds."""
    found = _found(_TIMED_LOG.format(test="loss - last_loss > args.tol"))
    assert (11, "PFL201") in found


# CRD's (and CMC's) NCE memory bank: the normalization constant is kept in a buffer at -1
# until the first forward sets it.
_MEMORY = """
    import torch

    class ContrastMemory(torch.nn.Module):
        def __init__(self, output_size):
            super().__init__()
            self.register_buffer("params", torch.tensor([16384, 0.07, -1.0]))
            self.output_size = output_size

        def forward(self, v1, weight):
            z = {read}
            out = torch.exp(torch.bmm(weight, v1) / 0.07)
            if z < 0:
                {store}
                print("normalization constant Z is set to {{:.1f}}".format(z.item() if torch.is_tensor(z) else z))
            return out / z

    memory = ContrastMemory(1000).cuda()
    for x, w in loader:
        loss = memory(x.cuda(), w.cuda()).mean()
        loss.backward()
"""


def test_a_sentinel_kept_on_the_object_is_set_once():
    source = _MEMORY.format(read="self.params[2].item()", store="self.params[2] = out.mean() * self.output_size\n"
                            "                z = self.params[2].clone().detach().item()")
    found = _found(source)
    assert (_row(source, "z = self.params[2].clone()"), "PFL201") not in found
    assert (10, "PFL201") in found  # reading the constant every forward stays a sync


def test_a_local_default_taken_every_step_is_not():
    """Twin: the branch sets the local only (nothing kept): it runs whenever the test holds."""
    source = _MEMORY.format(read="out_scale(v1)", store="z = out.mean().item() * self.output_size")
    assert (_row(source, "z = out.mean().item()"), "PFL201") in _found(source)


# contrastive-unpaired-translation's PatchSampleF builds its MLPs on the first forward.
_PATCH_SAMPLER = """
    import torch
    import torch.nn as nn

    class PatchSampleF(nn.Module):
        def create_mlp(self, feats):
            for mlp_id, feat in enumerate(feats):
                mlp = nn.Sequential(nn.Linear(feat.shape[1], self.nc), nn.ReLU())
                mlp.cuda()
                setattr(self, "mlp_%d" % mlp_id, mlp)
            self.mlp_init = True

        def forward(self, feats):
            if {test}:
                self.create_mlp(feats)
            return [f.flatten(1) for f in feats]
"""


def test_a_lazy_initialisation_under_and_runs_once():
    assert (8, "PFL107") not in _found(_PATCH_SAMPLER.format(test="self.use_mlp and not self.mlp_init"))


def test_a_flag_alone_under_and_is_no_lazy_initialisation():
    """Twin: `self.use_mlp and self.rebuild` holds on every step it is set."""
    assert (8, "PFL107") in _found(_PATCH_SAMPLER.format(test="self.use_mlp and self.rebuild"))


# SPADE's training loop prints when its IterationCounter says so.
_SPADE_LOOP = """
    import torch

    for i, data_i in enumerate(dataloader):
        losses = trainer.run_generator_one_step(data_i)
        if iter_counter.{helper}():
            for k, v in losses.items():
                print("%s: %.3f" % (k, v.mean().float()))
"""


def test_a_needs_printing_helper_throttles():
    assert not {code for row, code in _found(_SPADE_LOOP.format(helper="needs_printing")) if row == 7}


def test_another_needs_helper_does_not():
    """Twin: `needs_grad()` says nothing about which steps."""
    assert (7, "PFL210") in _found(_SPADE_LOOP.format(helper="needs_grad"))


def test_a_local_rebuilt_under_and_is_no_lazy_initialisation():
    """Twin (sd-scripts' attention): `if not attn_params.split_attn and ...:` rebuilds a local
    `attn_params` in its body, every call: the `.item()` there stays per step."""
    found = _found("""
        import torch

        def attention(q, attn_params):
            if not attn_params.split_attn and attn_params.seqlens is not None:
                seqlen = attn_params.seqlens[0].item()
                q = q[:, :seqlen]
                attn_params = AttentionParams.create_attention_params(attn_params.attn_mode, False)
            return q

        class Block(torch.nn.Module):
            def forward(self, x, attn_params):
                return attention(x, attn_params)
    """)
    assert (5, "PFL201") in found
