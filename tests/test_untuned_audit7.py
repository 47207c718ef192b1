"""Findings from reading training code nobody had tuned on (rotation Q: latent-diffusion,
litgpt, torch-ngp, CenterNet, nerf-pytorch, simple-faster-rcnn-pytorch and sgrvinod's
tutorials), each with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


def _with_code(found: set[tuple[int, str]], *codes: str) -> set[tuple[int, str]]:
    return {f for f in found if f[1] in codes}


_IMAGE_LOGGER = """
    import torch
    from pytorch_lightning.callbacks import Callback


    class ImageLogger(Callback):
        def __init__(self, batch_frequency):
            self.batch_freq = batch_frequency
            self.log_steps = [2 ** n for n in range(6)]

        def check_frequency(self, check_idx):
            {check}

        def log_img(self, pl_module, batch, batch_idx):
            if self.check_frequency(pl_module.global_step) and self.max_images > 0:
                images = pl_module.log_images(batch)
                for k in images:
                    images[k] = images[k].detach().cpu()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.log_img(pl_module, batch, batch_idx)
"""


def test_a_method_that_says_when_a_step_is_due_throttles_what_it_guards():
    """latent-diffusion's (and taming-transformers') `ImageLogger.check_frequency(idx)`
    returns True only under `if idx % self.batch_freq == 0 ...:`: images are logged every
    `batch_frequency` steps, not every step."""
    check = """if ((check_idx % self.batch_freq) == 0 or (check_idx in self.log_steps)) and (
                    check_idx > 0 or self.log_first_step):
                try:
                    self.log_steps.pop(0)
                except IndexError as e:
                    print(e)
                return True
            return False"""
    found = _found(_IMAGE_LOGGER.format(check=check))
    assert not _with_code(found, "PFL203"), found


def test_a_method_that_returns_true_on_other_steps_does_not_throttle():
    check = """if check_idx > 0 or self.log_first_step:
                return True
            return False"""
    found = _found(_IMAGE_LOGGER.format(check=check))
    assert (19, "PFL203") in found


_GENERATE = """
    import torch


    @torch.inference_mode()
    def generate(model, prompt, max_returned_tokens, device):
        input_pos = torch.arange(0, prompt.size(0), device=device)
        prefill_token = True
        tokens = [prompt]
        for _ in range(max_returned_tokens - prompt.size(0)):
            token = model(tokens[-1], input_pos).argmax(-1)
            tokens.append(token)
            if prefill_token:
                prefill_token = False
                input_pos = torch.tensor([prompt.size(0)], dtype=torch.int64).to(device)
            else:
                input_pos.add_(1)
            {reset}
        return torch.cat(tokens)
"""


def test_a_branch_that_turns_its_own_flag_off_runs_once():
    """litgpt's generation loop: `if prefill_token: prefill_token = False; input_pos =
    torch.tensor([prompt_size], ...)` builds the position once, after the prefill."""
    found = _found(_GENERATE.format(reset="pass"))
    assert not _with_code(found, "PFL101"), found


def test_a_flag_set_again_every_step_does_not_make_its_branch_run_once():
    found = _found(_GENERATE.format(reset="prefill_token = token.numel() > 1"))
    assert (14, "PFL101") in found


_TOY_MODEL = """
    import torch
    import torch.nn as nn


    class DraftModel(nn.Module):
        def forward(self, idx):
            return torch.tensor([0, 0, 3, 4, 10, 9, 7, 8, 0, 0], dtype=torch.float)[None, None, ...]


    def test_speculative_decoding_accepts_draft_tokens():
        assert DraftModel()(torch.zeros(1)).shape == (1, 1, 10)
"""


def test_a_toy_model_in_a_pytest_file_is_not_per_step_code():
    """litgpt's tests define models whose `forward` returns a constant: the test calls them
    once to check a result, it does not train with them."""
    found = _found(_TOY_MODEL, filename="tests/test_generate_speculatively.py")
    assert not _with_code(found, "PFL106"), found


def test_the_same_model_outside_a_test_file_is_per_step_code():
    found = _found(_TOY_MODEL, filename="draft.py")
    assert (7, "PFL106") in found


_PREPARE_DATA = """
    import numpy as np
    import torch


    class Trainer:
        def prepare_data(self, data):
            if isinstance(data, dict):
                for k, v in data.items():
                    if isinstance(v, np.ndarray):
                        data[k] = torch.from_numpy(v).to(self.device, non_blocking=True)
            return data

        def train_one_epoch(self, loader):
            for data in loader:
                data = self.prepare_data(data)
                {extra}
                loss = self.model(data["points"]).mean()
                loss.backward()
                self.optimizer.step()
"""


def test_an_array_known_only_from_an_isinstance_check_may_be_the_batch():
    """torch-ngp's `Trainer.prepare_data(data)` moves whatever arrays the batch holds: their
    data has to cross, so "compute it on the device, or build it once" does not apply."""
    found = _found(_PREPARE_DATA.format(extra="pass"))
    assert not _with_code(found, "PFL101"), found


def test_an_array_computed_on_the_host_every_step_is_still_reported():
    extra = """noise = np.random.normal(size=(1024, 3)).astype(np.float32)
                data["noise"] = torch.from_numpy(noise).to(self.device)"""
    found = _found(_PREPARE_DATA.format(extra=extra))
    assert (17, "PFL101") in found


_RANKS = """
    import torch


    class MultiBoxLoss(torch.nn.Module):
        def forward(self, conf_loss_neg, labels, device):
            n_priors = conf_loss_neg.size(1)
            ranks = {ranks}.unsqueeze(0).expand_as(conf_loss_neg).to(device)
            return conf_loss_neg * ranks
"""


def test_a_legacy_constructor_of_a_range_expanded_like_a_device_tensor_is_built_on_the_host():
    """sgrvinod's SSD tutorial: `torch.LongTensor(range(n_priors)).unsqueeze(0).expand_as(
    conf_loss_neg).to(device)` is `torch.arange(n_priors)` made on the host and copied every
    step; `expand_as` reads only the other tensor's shape."""
    found = _found(_RANKS.format(ranks="torch.LongTensor(range(n_priors))"))
    assert (7, "PFL101") in found


def test_a_batch_expanded_like_a_device_tensor_is_data_that_has_to_cross():
    found = _found(_RANKS.format(ranks="labels"))
    assert not _with_code(found, "PFL101"), found


_ACCUMULATION = """
    import torch


    def train(model, loader, optimizer, train_state, args):
        for batch in loader:
            loss = model(batch.cuda(non_blocking=True)).mean()
            loss.backward()
            train_state.acc_step = (train_state.acc_step + 1) % args.grad_acc_steps
            if train_state.acc_step == 0:
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item()
                {step}
"""


def test_a_counter_test_that_gates_the_optimizer_step_is_the_accumulation_boundary():
    """lingua's `if train_state.acc_step == 0: ... .item(); optimizer.step()`: the counter is
    not known to be a number, and the branch runs on every optimizer step, not once."""
    found = _found(_ACCUMULATION.format(step="optimizer.step()"))
    assert (10, "PFL201") in found


def test_a_step_counter_restored_from_a_checkpoint_still_guards_a_first_step_branch():
    found = _found(_ACCUMULATION.format(step="pass").replace(
        "train_state.acc_step == 0", "train_state.global_step == 0"))
    assert not _with_code(found, "PFL201"), found


_PRIORS = """
    import torch


    class MultiBoxLoss(torch.nn.Module):
        def __init__(self, priors_cxcy):
            super().__init__()
            self.priors_cxcy = priors_cxcy

        def forward(self, scores, device):
            n_priors = self.priors_cxcy.{method}(0)
            ranks = torch.LongTensor(range(n_priors)).unsqueeze(0).to(device)
            return scores * ranks
"""


def test_the_size_of_an_attribute_of_unknown_kind_is_an_int():
    """The SSD tutorial's `n_priors = self.priors_cxcy.size(0)` (a constructor argument):
    `size(dim)` returns an int, so `torch.LongTensor(range(n_priors))` is an arange built on
    the host."""
    found = _found(_PRIORS.format(method="size"))
    assert (11, "PFL101") in found


def test_another_method_of_an_attribute_of_unknown_kind_says_nothing():
    found = _found(_PRIORS.format(method="lookup"))
    assert not _with_code(found, "PFL101"), found


_SAMPLER = """
    import pickle

    import numpy as np
    import torch


    def edm_sampler(net, latents, num_steps=18, S_churn=0, S_min=0, S_max=float("inf")):
        t_steps = torch.linspace(80, 0.002, num_steps, dtype=torch.float64, device=latents.device)
        x_next = latents.to(torch.float64) * t_steps[0]
        for i, (t_cur, t_next) in enumerate(zip(t_steps[:-1], t_steps[1:])):
            gamma = min(S_churn / num_steps, np.sqrt(2) - 1) if S_min <= t_cur <= S_max else 0
            denoised = net(x_next, t_cur + gamma * t_cur).to(torch.float64)
            x_next = x_next + (t_next - t_cur) * denoised
        return x_next


    def ablation_sampler(net, latents, num_steps=18):
        return net(latents, torch.ones(latents.shape[0], device=latents.device))


    def main(network_pkl, device, ablation=False):
        with open(network_pkl, "rb") as f:
            {name} = pickle.load(f)["ema"].to(device)
        sampler_fn = ablation_sampler if ablation else edm_sampler
        latents = torch.randn([8, 3, 32, 32], device=device)
        return sampler_fn({name}, latents)
"""


def test_a_network_loaded_and_moved_is_a_module_whichever_sampler_runs_it():
    """EDM's generate.py: `net = pickle.load(f)["ema"].to(device)` is the network (its name
    says so), not a tensor; `sampler_fn = ablation_sampler if ... else edm_sampler` runs one
    of the two, and edm_sampler's loop runs the model at each step, whose `S_min <= t_cur`
    reads a device tensor."""
    found = _found(_SAMPLER.format(name="net"))
    assert (11, "PFL206") in found


def test_a_loaded_and_moved_value_named_like_data_is_still_a_tensor():
    found = _found(_SAMPLER.format(name="latents_init"))
    assert (11, "PFL206") not in found


_DATA_MODULE = """
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader


    class DataModuleFromConfig({base}):
        def __init__(self, datasets, batch_size, num_workers=4):
            super().__init__()
            self.datasets, self.batch_size, self.num_workers = datasets, batch_size, num_workers

        def train_dataloader(self):
            return DataLoader(self.datasets["train"], batch_size=self.batch_size, num_workers=self.num_workers)

        def val_dataloader(self):
            return [DataLoader(d, batch_size=self.batch_size, num_workers=4) for d in self.datasets["val"]]
"""


def test_the_loaders_a_lightning_data_module_returns_feed_the_device():
    """latent-diffusion's `DataModuleFromConfig.train_dataloader()`: Lightning copies each
    batch to the module's device, from pageable memory without `pin_memory`."""
    found = _found(_DATA_MODULE.format(base="pl.LightningDataModule"))
    assert {(11, "PFL104"), (14, "PFL104")} <= found, found


def test_the_same_methods_on_a_class_no_framework_calls_feed_nothing():
    found = _found(_DATA_MODULE.format(base="object"))
    assert not _with_code(found, "PFL103", "PFL104"), found


_INSTALLED_HOOKS = """
    from functools import partial

    import pytorch_lightning as pl
    from torch.utils.data import DataLoader


    class DataModuleFromConfig(pl.LightningDataModule):
        def __init__(self, batch_size, train=None, validation=None):
            super().__init__()
            self.batch_size = batch_size
            if train is not None:
                self.train_dataloader = self._train_dataloader
            if validation is not None:
                self.val_dataloader = partial(self._val_dataloader, shuffle=False)

        def _train_dataloader(self):
            return DataLoader(self.datasets["train"], batch_size=self.batch_size, num_workers=8)

        def _val_dataloader(self, shuffle=False):
            return DataLoader(self.datasets["validation"], batch_size=self.batch_size, num_workers=8)

        def _debug_dataloader(self):
            return DataLoader(self.datasets["train"], batch_size=1)
"""


def test_methods_installed_as_lightning_loader_hooks_feed_the_device():
    """latent-diffusion's (and stable-diffusion's) `self.train_dataloader =
    self._train_dataloader`, `self.val_dataloader = partial(self._val_dataloader, ...)`;
    `_debug_dataloader`, installed as nothing, is not reported."""
    found = _with_code(_found(_INSTALLED_HOOKS), "PFL103", "PFL104")
    assert found == {(17, "PFL104"), (20, "PFL104")}, found


_PIX2PIX = """
    import torch


    def get_edges(t):
        edge = {made}.zero_()
        edge[:, :, :, 1:] = edge[:, :, :, 1:] | (t[:, :, :, 1:] != t[:, :, :, :-1])
        return edge.float()


    def train(model, dataset, opt, start_epoch, epoch_iter):
        total_steps = (start_epoch - 1) * len(dataset) + epoch_iter
        print_delta = total_steps % opt.print_freq
        for i, data in enumerate(dataset):
            total_steps += opt.batch_size
            edges = get_edges(data["inst"].cuda(non_blocking=True))
            losses = model(data["label"].cuda(non_blocking=True), edges)
            losses["G"].backward()
            if total_steps % opt.print_freq == {phase}:
                errors = {{k: v.item() for k, v in losses.items()}}
"""


def test_a_legacy_cuda_type_given_a_size_is_made_on_the_device_and_an_offset_phase_throttles():
    """pix2pixHD: `torch.cuda.ByteTensor(t.size()).zero_()` allocates on the GPU (a size, not
    data), and `if total_steps % opt.print_freq == print_delta:` logs once per print_freq."""
    found = _found(_PIX2PIX.format(made="torch.cuda.ByteTensor(t.size())", phase="print_delta"))
    assert not _with_code(found, "PFL101", "PFL201"), found


def test_a_legacy_cuda_type_given_data_copies_it_and_a_phase_that_always_matches_does_not_throttle():
    found = _found(_PIX2PIX.format(made="torch.cuda.ByteTensor([[0, 1], [1, 0]])",
                                   phase="total_steps % opt.print_freq"))
    assert {(5, "PFL101"), (19, "PFL201")} <= found, found


_HIGH_PASS = """
    import torch
    import torch.nn as nn


    class HighPass(nn.Module):
        def forward(self, x, up=True):
            N, H = 8, x.size(2)
            if up:
                head = torch.arange(H - N) + N
                tail = torch.arange(N)
            else:
                head = {other}
                tail = torch.arange(H - N)
            perm = torch.cat([head, tail]).to(x.device)
            return x[:, :, perm, :]
"""


def test_parts_built_on_the_host_on_both_branches_are_host_built():
    """stargan-v2's `shift()`: `head` and `tail` are aranges on either branch, then
    `torch.cat([head, tail]).to(x.device)` copies them every call."""
    found = _found(_HIGH_PASS.format(other="torch.arange(N) + (H - N)"))
    assert (14, "PFL101") in found


def test_a_part_that_is_data_on_one_branch_is_not_host_built():
    found = _found(_HIGH_PASS.format(other="x.new_tensor([0]).long().cpu()"))
    assert not _with_code(found, "PFL101"), found


_FEATURE_BANK = """
    import torch
    import torch.distributed as dist


    @torch.no_grad()
    def extract_features(model, data_loader):
        features = None
        for samples, index in data_loader:
            samples = samples.cuda(non_blocking=True)
            feats = model(samples).clone()
            if dist.get_rank() == 0 and features is None:
                features = torch.zeros(len(data_loader.dataset), feats.shape[-1])
                features = features.cuda(non_blocking=True)
            features.index_copy_(0, index.cuda(non_blocking=True), feats)
            {reset}
        return features
"""


def test_a_local_filled_on_the_first_step_is_filled_once():
    """dino's `extract_features`: `if dist.get_rank() == 0 and features is None:` makes the
    feature bank on the first batch only."""
    found = _found(_FEATURE_BANK.format(reset="pass"))
    assert not _with_code(found, "PFL101"), found


def test_a_local_the_loop_empties_again_is_filled_every_step():
    found = _found(_FEATURE_BANK.format(reset="features = None"))
    assert (13, "PFL101") in found, found
