"""Findings from reading training code nobody had tuned on (rotation M: open_clip,
Swin-Transformer, ConvNeXt, SimCLR, byol-pytorch, k-diffusion, edm, stylegan2-ada-pytorch,
modded-nanogpt), each with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


_NOISE_SCALE = """
    import torch


    class GradientNoiseScale:
        def __init__(self, beta=0.9998, eps=1e-8):
            self.beta, self.eps = beta, eps
            self.ema_sq_norm, self.ema_var = 0., 0.

        def update(self, {params}):
            {body}
            return max(self.ema_var, self.eps) / max(self.ema_sq_norm, self.eps)


    gns = GradientNoiseScale()
    for batch in loader:
        loss = model(batch.cuda()).mean()
        loss.backward()
        optimizer.step()
        gns.update({args})
"""


def test_counts_and_statistics_of_a_batch_are_not_batches():
    """k-diffusion's gradient noise scale: `update(sq_norm_small_batch, sq_norm_large_batch,
    n_small_batch, n_large_batch)` is handed Python floats and ints. Named `*_batch`, they
    were taken for data batches (tensors), and `max(self.ema_var, self.eps)` for a sync."""
    body = """est_sq_norm = (n_large_batch * sq_norm_large_batch - n_small_batch * sq_norm_small_batch) / (
                n_large_batch - n_small_batch)
            est_var = (sq_norm_small_batch - sq_norm_large_batch) / (1 / n_small_batch - 1 / n_large_batch)
            self.ema_sq_norm = self.beta * self.ema_sq_norm + (1 - self.beta) * est_sq_norm
            self.ema_var = self.beta * self.ema_var + (1 - self.beta) * est_var"""
    found = _found(_NOISE_SCALE.format(
        params="sq_norm_small_batch, sq_norm_large_batch, n_small_batch, n_large_batch", body=body,
        args="small, large, 4, 32"))
    assert not {f for f in found if f[1] == "PFL208"}, found


def test_a_batch_parameter_compared_with_max_is_still_reported():
    body = """self.ema_var = self.beta * self.ema_var + (1 - self.beta) * images_batch.var()
            self.ema_sq_norm = self.beta * self.ema_sq_norm + (1 - self.beta) * images_batch.square().mean()"""
    found = _found(_NOISE_SCALE.format(params="images_batch", body=body, args="images"))
    assert (12, "PFL208") in found


_TRAINER = """
    import torch
    from torch import nn


    class BYOLTrainer(nn.Module):
        def __init__(self, net, optimizer, dataloader, num_train_steps):
            super().__init__()
            self.net, self.optimizer, self.dataloader = net, optimizer, dataloader
            self.num_train_steps = num_train_steps
            self.register_buffer("step", torch.tensor(0))

        def forward(self{params}):
            step = self.step.item()
            {body}
"""


def test_a_module_whose_forward_runs_the_training_loop_is_not_one_step():
    """byol-pytorch's `BYOLTrainer(Module).forward()` is the whole training run: what it
    does before its loop runs once; its loop body runs every step."""
    body = """data_it = iter(self.dataloader)
            for _ in range(self.num_train_steps):
                images = next(data_it)
                loss = self.net(images)
                loss.backward()
                print(f"loss {loss.item():.3f}")
                self.optimizer.step()
                self.optimizer.zero_grad()"""
    found = _found(_TRAINER.format(params="", body=body))
    assert (13, "PFL201") not in found
    assert (19, "PFL201") in found


def test_a_module_whose_forward_is_one_step_is_reported_throughout():
    body = "return self.net(x) * step"
    found = _found(_TRAINER.format(params=", x", body=body))
    assert (13, "PFL201") in found


_TICKS = """
    import torch


    def training_loop(G, opt, training_set_iterator, device, total_kimg, kimg_per_tick, batch_size):
        augment_p = torch.zeros([], device=device)
        cur_nimg = cur_tick = tick_start_nimg = 0
        while True:
            phase_real_img, phase_real_c = next(training_set_iterator)
            loss = G(phase_real_img.to(device)).mean()
            loss.backward()
            opt.step()
            cur_nimg += batch_size
            done = cur_nimg >= total_kimg * 1000
            if {guard}:
                continue
            print(f"augment {{float(augment_p.cpu()):.3f}}")
            cur_tick += 1
            tick_start_nimg = cur_nimg
            if done:
                break
"""


def test_what_follows_a_skip_until_the_next_tick_is_not_per_step():
    """StyleGAN2-ADA's and EDM's training loops: "Perform maintenance tasks once per tick"
    is `if (not done) and (cur_tick != 0) and (cur_nimg < tick_start_nimg + kimg_per_tick *
    1000): continue`; what follows runs once per tick."""
    for guard in ("(not done) and (cur_tick != 0) and (cur_nimg < tick_start_nimg + kimg_per_tick * 1000)",
                  "cur_nimg < next_tick_nimg"):
        found = _found(_TICKS.format(guard=guard))
        assert not {f for f in found if f[0] == 16}, (guard, found)


def test_what_follows_a_skip_during_warm_up_is_per_step():
    for guard in ("cur_nimg < warmup_nimg", "(not done) and use_aug and (cur_nimg < tick_start_nimg + 4000)"):
        found = _found(_TICKS.format(guard=guard))
        assert (16, "PFL203") in found, (guard, found)


_CONSTANT_CACHE = """
    import numpy as np
    import torch

    _constant_cache = dict()


    def constant(value, dtype=None, device=None):
        value = np.asarray(value)
        key = (value.shape, value.dtype, value.tobytes(), dtype, device)
        tensor = _constant_cache.get(key, None)
        if tensor is None:
            tensor = torch.as_tensor(value.copy(), dtype=dtype, device=device)
            {store}
        return tensor


    class AugmentPipe(torch.nn.Module):
        def forward(self, images):
            return images * constant(np.asarray([1, 0, 0]), device=images.device)
"""


def test_a_tensor_built_on_a_cache_miss_is_built_once_per_key():
    """StyleGAN2-ADA's `misc.constant()`: the tensor is built and stored in a cache on a
    miss, and served from it every later call."""
    found = _found(_CONSTANT_CACHE.format(store="_constant_cache[key] = tensor"))
    assert (12, "PFL101") not in found, found


def test_a_tensor_built_whenever_a_lookup_misses_without_storing_is_reported():
    found = _found(_CONSTANT_CACHE.format(store="pass"))
    assert (12, "PFL101") in found, found


_SOLVER = """
    import torch
    from torch import nn


    class DPMSolver(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def t(self, sigma):
            return -sigma.log()

        def adaptive(self, x, t_start, t_end, h=0.05):
            forward = t_end > t_start
            s = t_start
            while s < t_end - 1e-5 if forward else s > t_end + 1e-5:
                t = torch.minimum(t_end, s + h) if forward else torch.maximum(t_end, s + h)
                x = self.model(x, t)
                s = t
            return x


    def sample_dpm_adaptive(model, x, sigma_min, sigma_max):
        solver = DPMSolver(model)
        return solver.adaptive(x, solver.t(torch.tensor(sigma_max{device})), solver.t(torch.tensor(sigma_min{device})))
"""


def _found_with(source: str, select: list[str]) -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, "sampling.py", select=select)}


def test_a_solver_stepping_cpu_tensors_is_silent_whatever_rules_are_selected():
    """k-diffusion's adaptive DPM solver steps the times `torch.tensor(sigma)` made on the
    CPU: its `while s < t_end` waits for no GPU. A build that visited `accelerator.prepare`
    in set-up code reported it (3 PFL206) once a data rule was selected too: what one rule
    reports must not depend on which others run."""
    source = _SOLVER.format(device="")
    for select in (["PFL206"], ["PFL206", "PFL104", "PFL105"], ["ALL"]):
        assert not {f for f in _found_with(source, select) if f[1] == "PFL206"}, select


def test_a_solver_stepping_device_tensors_is_reported_whatever_rules_are_selected():
    source = _SOLVER.format(device=", device=x.device")
    found = [{f for f in _found_with(source, select) if f[1] == "PFL206"}
             for select in (["PFL206"], ["PFL206", "PFL104", "PFL105"], ["ALL"])]
    assert found[0] == found[1] == found[2] == {(16, "PFL206"), (17, "PFL206")}


_VARIABLE = """
    import torch
    from torch.autograd import Variable

    x = Variable(torch.randn(64, 1000){device}, requires_grad=False)
    w = Variable(torch.randn(1000, 10){device}, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=1e-6)
    for t in range(500):
        loss = x.mm(w).pow(2).sum()
        print("Iter {{}} loss: {{}}".format(t, loss.data[0]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_variable_of_a_cpu_tensor_stays_on_the_cpu():
    """tacotron2's loss_scaler.py smoke test wraps CPU tensors in `Variable(...)` (torch <
    0.4): the Variable is the tensor, where it lives; formatting its loss waits for no GPU."""
    found = _found(_VARIABLE.format(device=""))
    assert (9, "PFL210") not in found, found


def test_a_variable_of_a_device_tensor_is_on_the_device():
    found = _found(_VARIABLE.format(device=".cuda()"))
    assert (9, "PFL210") in found, found


def test_a_train_step_that_loops_over_its_optimizers_is_still_one_step():
    """audiolm-pytorch's `SoundStreamTrainer.train_step()` steps each discriminator's optimizer
    in a loop: it is still one step (by its name), not a training loop."""
    found = _found("""
        import torch
        from torch import nn


        class SoundStreamTrainer(nn.Module):
            def __init__(self, model, optims):
                super().__init__()
                self.model, self.optims = model, optims
                self.register_buffer("steps", torch.tensor(0))

            def train_step(self):
                steps = int(self.steps.item())
                for _ in range(self.grad_accum_every):
                    wave, = next(self.dl_iter)
                    self.model(wave).backward()
                for opt in self.optims:
                    opt.step()
                    opt.zero_grad()
                self.steps.add_(1)
                return steps
    """)
    assert (12, "PFL201") in found, found


_TWO_LOADERS = """
    import torch
    from torch.utils.data import DataLoader


    def make_loader(ds, fast):
        if fast:
            loader = DataLoader(ds, batch_size=8, shuffle=False, {settings})
        else:
            loader = DataLoader(ds, batch_size=8, shuffle=True)
        return loader


    device = torch.device("cuda")
    for x in make_loader(dataset, args.fast):
        x = x.to(device)
"""


def test_loaders_built_alike_on_two_branches_are_both_reported():
    """guided-diffusion's `load_data` builds `loader` on two branches that differ only in
    `shuffle`: both calls are the loader the training loop moves."""
    found = _found(_TWO_LOADERS.format(settings="drop_last=True"))
    assert {(7, "PFL104"), (9, "PFL104")} <= found, found


def test_loaders_built_differently_on_two_branches_are_not_guessed():
    found = _found(_TWO_LOADERS.format(settings="num_workers=4, pin_memory=True"))
    assert not {f for f in found if f[1] in ("PFL104", "PFL105")}, found


_LEGACY_CUDA = """
    import numpy as np
    import torch
    from torch.autograd import Variable

    cuda = True if torch.cuda.is_available() else False
    Tensor = {tensor_type}
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True)
    for epoch in range(200):
        for i, (imgs, _) in enumerate(dataloader):
            real_imgs = Variable(imgs.type(Tensor))
            loss = discriminator(real_imgs).mean()
            loss.backward()
            optimizer_D.step()
"""


def test_a_batch_cast_to_a_cuda_tensor_type_is_a_copy_to_the_gpu():
    """PyTorch-GAN's `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, then
    `imgs.type(Tensor)`: every batch is copied to the GPU, from pageable memory here."""
    found = _found(_LEGACY_CUDA.format(tensor_type="torch.cuda.FloatTensor if cuda else torch.FloatTensor"))
    assert (7, "PFL104") in found, found


def test_a_batch_cast_to_a_host_tensor_type_stays_on_the_host():
    found = _found(_LEGACY_CUDA.format(tensor_type="torch.FloatTensor"))
    assert (7, "PFL104") not in found, found
