"""Findings and misses from reading training code nobody had tuned on (gpt-neox, vissl,
torchtune, trl, diffusers, OpenNMT-py, mmengine, ijepa, imagen-pytorch, DALLE-pytorch), each
with its twin."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


_FEATURE_DUMP = """
    import numpy as np
    import torch

    class Extractor:
        def _save(self, features):
            output = {}
            for layer in features.keys():
                indices = sorted(features[layer].keys())
                output[layer] = np.array([features[layer][i].tolist() for i in indices])
            return output

        def extract(self, names, task):
            out = {}
            for name in names:
                out[name] = {}
            while True:
                sample = next(task.data_iterator)
                with torch.no_grad():
                    feats = task.model(sample["input"].cuda(non_blocking=True))
                    for num, name in enumerate(names):
                        feature = feats[num]{move}
                        for idx in range(4):
                            out[name][idx] = feature[idx]
                self._save(out)
"""


def test_values_stored_into_a_dict_come_back_from_its_subscripts():
    """vissl's feature extraction: `out[name][idx] = feature[idx]` of a NumPy array, then
    `features[layer][i].tolist()` in the saving helper is NumPy's `tolist`, not a sync."""
    found = _found(_FEATURE_DUMP.replace("{move}", ".cpu().numpy()"))
    assert (9, "PFL202") not in found
    assert (21, "PFL203") in found  # the one real copy, each step


def test_device_tensors_stored_into_a_dict_are_still_tensors():
    """The twin: the same dict filled with the device tensors themselves."""
    found = _found(_FEATURE_DUMP.replace("{move}", ""))
    assert (9, "PFL202") in found


_NEOX = """
    import torch

    def get_batch(data_iterator):
        return next(data_iterator)["text"].cuda()

    def forward_step(data_iterator, model):
        tokens = get_batch(data_iterator)
        return model(tokens).sum()

    def train_step(args, data_iterator, model):
        losses = []
        for _ in range({count}):
            loss = forward_step(data_iterator, model)
            model.backward(loss)
            model.step()
            losses.append(loss)
        return {"lm_loss": torch.stack(losses).mean()}

    def train(args, model, train_data_iterator):
        iteration = 0
        while iteration < args.train_iters:
            loss_dict = train_step(args, train_data_iterator, model)
            iteration += 1
            print(loss_dict["lm_loss"].item())
"""


def test_a_loop_calling_a_gradient_accumulation_step_is_the_training_loop():
    """gpt-neox: `train_step` runs `for _ in range(args.gradient_accumulation_steps)` around
    the forward and backward passes. One call is one step, so the `while` loop that calls
    it (and logs after it) runs every step."""
    assert (24, "PFL201") in _found(_NEOX.replace("{count}", "args.gradient_accumulation_steps"))


def test_a_loop_calling_a_function_with_its_own_loop_over_the_data_is_an_epoch_loop():
    """The twin: a loop over a count that names no accumulation (`args.num_epochs_per_call`)
    is a loop of many steps, so the caller's loop runs once per call, not every step."""
    assert (24, "PFL201") not in _found(_NEOX.replace("{count}", "len(data_iterator)"))


_SAVE = """
    import torch
    import torch.distributed as dist

    def is_save_iter(args, iteration):
        if args.extra_save_iters and iteration in args.extra_save_iters:
            return True
        return iteration % args.save_interval == 0

    def save_checkpoint(model, iteration):
        dist.barrier()
        torch.save(model.state_dict(), f"ckpt-{iteration}.pt")

    def train(args, model, loader, optimizer):
        for iteration, (x, y) in enumerate(loader):
            loss = model(x.cuda()).sum()
            loss.backward()
            optimizer.step()
            if {test}:
                save_checkpoint(model, iteration)
"""


def test_a_helper_named_as_a_save_step_test_throttles_what_it_guards():
    """gpt-neox's `if args.save and is_save_iter(args, iteration): save_checkpoint(...)`:
    the barrier in the saving code runs on the saving steps only."""
    assert (10, "PFL228") not in _found(_SAVE.replace("{test}", "args.save and is_save_iter(args, iteration)"))


def test_a_save_guarded_by_a_plain_flag_runs_every_step():
    """The twin: guarded by a flag that says nothing of the step, it runs every step."""
    assert (10, "PFL228") in _found(_SAVE.replace("{test}", "args.save"))


_LOGGER = """
    import wandb

    def tb_wandb_log(key: str, value: float, iteration: int, use_wandb: bool):
        if use_wandb:
            wandb.log({key: value}, step=iteration)

    def train(model, loader, optimizer):
        for step, (x, y) in enumerate(loader):
            loss = model(x.cuda()).sum()
            loss.backward()
            optimizer.step()
            tb_wandb_log("train/loss", {value}, step, use_wandb=True)
"""


def test_a_float_annotation_does_not_hide_the_device_tensor_callers_pass():
    """gpt-neox's `tb_wandb_log(key, value: float, ...)` is given the loss tensor every step:
    what the callers pass says more than the annotation."""
    assert (5, "PFL231") in _found(_LOGGER.replace("{value}", "loss.detach()"))


def test_a_float_annotated_logger_given_numbers_is_silent():
    """The twin: given the Python number `loss.item()` already made, the logger copies nothing."""
    found = _found(_LOGGER.replace("{value}", "loss.item()"))
    assert (5, "PFL231") not in found
    assert (12, "PFL201") in found


_UNWRAP = """
    import torch

    def main(accelerator, unet, train_dataloader, vae, optimizer):
        for step, batch in enumerate(train_dataloader):
            latents = vae.encode(batch["pixel_values"]).latent_dist.sample()
            bsz, channels, height, width = latents.shape
            if {test}:
                latents = torch.cat([latents, latents], dim=1)
            loss = unet(latents).sum()
            loss.backward()
            optimizer.step()
"""


def test_a_method_that_fetches_a_model_returns_the_model_not_its_output():
    """diffusers' DreamBooth: `accelerator.unwrap_model(unet).config.in_channels == channels * 2`
    compares two ints: `unwrap_model` gives the module back, it does not run it."""
    assert _found(_UNWRAP.replace("{test}", "accelerator.unwrap_model(unet).config.in_channels == channels * 2")) \
        == set()


def test_a_method_named_after_a_model_still_runs_it():
    """The twin: `trainer.ema_model(latents)` runs a model, and `if` on its output syncs."""
    assert (7, "PFL206") in _found(_UNWRAP.replace("{test}", "accelerator.ema_model(latents).mean() > 0"))


_SKIP = """
    import torch

    def train(model, loader, optimizer, accum, every):
        for step, (x, y) in enumerate(loader):
            loss = model(x.cuda()).sum()
            loss.backward()
            if {test}:
                continue
            optimizer.step()
            print(loss.item())
"""


def test_code_after_a_skip_unless_every_nth_step_is_throttled():
    """imagen-pytorch's `if total_steps % self.checkpoint_every: return` before saving (here
    `continue` in a loop): what follows runs every n steps."""
    found = _found(_SKIP.replace("{test}", "step % every").replace("            optimizer.step()\n", ""))
    assert (9, "PFL201") not in found


def test_a_skip_that_gates_the_optimizer_step_is_gradient_accumulation():
    """The twin: `if (step + 1) % accum != 0: continue` before `optimizer.step()` is gradient
    accumulation; what follows is the training step itself."""
    assert (10, "PFL201") in _found(_SKIP.replace("{test}", "(step + 1) % accum != 0"))


_REGISTERED_STEP = """
    import torch

    TRAIN_STEPS = {{}}

    def register_train_step(name):
        def wrap(cls):
            TRAIN_STEPS[name] = cls
            return cls
        return wrap

    @register_train_step("standard")
    class {name}:
        def __call__(self, task):
            sample = next(task.data_iterator)
            output = task.model(sample["input"].cuda(non_blocking=True))
            loss = task.loss(output, sample["target"].cuda(non_blocking=True))
            task.losses.append(loss.detach().cpu().item())
            loss.backward()
            task.optimizer.step()
            return task
"""


def test_a_training_step_found_through_a_registry_runs_every_step():
    """vissl's `@register_train_step(...) class StandardTrainStep: def __call__(self, task)`:
    the trainer looks it up by name, so no loop is seen calling it; one call runs the
    backward pass and the optimizer step, and it is named a training step."""
    assert (17, "PFL203") in _found(_REGISTERED_STEP.format(name="StandardTrainStep"))


def test_a_callable_that_trains_but_is_not_named_a_step_needs_a_hot_caller():
    """The twin: a `Warmup` object that runs one backward pass is per-step only if hot code
    calls it (here nothing does)."""
    assert _found(_REGISTERED_STEP.format(name="Warmup")) == set()


_CLASSY_HOOK = """
    import torch
    from classy_vision.hooks import ClassyHook

    class CheckNanLossHook(ClassyHook):
        def on_start(self, task):
            print(task.loss.weight.cpu())

        def on_loss_and_meter(self, task):
            loss = task.last_batch.loss.data.cpu()
            if not torch.isfinite(loss).all():
                raise FloatingPointError("loss is not finite")

    class MomentumHook(ClassyHook):
        def on_forward(self, task):
            if {test} is None:
                self._build_momentum_encoder(task)
            out = task.loss.momentum_encoder(task.last_batch.sample["input"])
            task.loss.momentum_scores = out.detach()

        def _build_momentum_encoder(self, task):
            task.loss.momentum_encoder = torch.nn.Linear(8, 8).cuda()
"""


def test_classy_vision_hooks_run_every_step_and_build_their_state_once():
    """vissl's hooks: `task.run_hooks("on_loss_and_meter")` every step (its `.cpu()` is a
    sync), `on_start` once; `if task.loss.momentum_encoder is None:
    self._build_momentum_encoder(task)` builds state kept on an object, once."""
    found = _found(_CLASSY_HOOK.replace("{test}", "task.loss.momentum_encoder"))
    assert (9, "PFL203") in found
    assert (6, "PFL203") not in found and (6, "PFL210") not in found
    assert (21, "PFL107") not in found


def test_a_builder_under_a_local_none_test_may_run_every_step():
    """The twin: a local name tested for None is not state kept across steps: the branch
    (and the `.cuda()` of a freshly built module in the builder) may run every step."""
    found = _found(_CLASSY_HOOK.replace("{test}", "task.last_batch.sample.get('encoder')"))
    assert (21, "PFL107") in found


_EVAL = """
    import soundfile as sf
    import torch
    from metrics import get_metrics

    def main(model, test_set, loss_func, optimizer, results):
        model = model.cuda()
        for idx in range(len(test_set)):
            mix, sources = test_set[idx]
            mix, sources = mix.cuda(), sources.cuda()
            est = model(mix[None])
            loss = loss_func(est, sources[None]){train}
            est_np = est.squeeze(0).cpu().data.numpy()
            {use}
"""


def test_numpy_copies_an_evaluation_loop_hands_to_a_function_are_the_point():
    """asteroid's eval.py: each utterance's estimate goes to `get_metrics` (NumPy, mir_eval)
    and to `sf.write` in the same iteration: the host needs it there, so PFL203 leaves the
    copy to the opt-in PFL229."""
    found = _found(_EVAL.replace("{train}", "").replace(
        "{use}", "utt = get_metrics(est_np, sample_rate=8000)\n            for src in est_np:\n"
                 "                sf.write('out.wav', src, 8000)"))
    assert (12, "PFL203") not in found and (12, "PFL229") in found


def test_numpy_copies_kept_in_a_list_or_made_while_training_are_reported():
    """The twins: appended to a list, the arrays could be copied once after the loop; in a
    training loop (backward and optimizer step) the copy costs every step."""
    appended = _found(_EVAL.replace("{train}", "").replace("{use}", "results.append(est_np)"))
    assert (12, "PFL203") in appended
    training = _found(_EVAL.replace("{train}", "\n            loss.backward()\n            optimizer.step()").replace(
        "{use}", "utt = get_metrics(est_np, sample_rate=8000)"))
    assert (14, "PFL203") in training


_SOLVER = """
    import torch

    def evaluate_audio(y_pred, y):
        return {"err": (y_pred - y).abs().mean().item()}

    class Solver:
        def run_step(self, idx, batch, metrics):
            raise NotImplementedError

        def run_epoch(self, pool):
            lp = self.log_progress("train", self.dataloaders["train"])
            for idx, {target} in enumerate(lp):
                metrics = self.run_step(idx, {target}, {{}})
                print(metrics["loss"].item())
                x = self.last_output
                if first_batch and self.is_main:
                    self.save_samples(x.cpu())
                pool.submit(evaluate_audio, x.cpu(), {target})
"""


def test_a_loop_naming_its_element_a_batch_iterates_the_data():
    """audiocraft's solvers: `for idx, batch in enumerate(lp)` over a progress wrapper of a
    loader that flashy builds, each step in a `run_step` that subclasses define: the loop's
    name for the element says it is the data loop. Not per-step: a sample save guarded by
    `first_batch`, and what a worker runs (`pool.submit(evaluate_audio, x.cpu(), batch)`;
    its copy is for the worker)."""
    found = _found(_SOLVER.replace("{target}", "batch"))
    assert (14, "PFL201") in found
    assert (17, "PFL203") not in found
    assert (5, "PFL201") not in found
    assert (18, "PFL203") not in found


def test_a_loop_over_unknown_items_not_named_a_batch_is_not_the_data_loop():
    """The twin: `for idx, item in enumerate(lp)` says nothing of what it iterates."""
    assert (14, "PFL201") not in _found(_SOLVER.replace("{target}", "item"))


def test_a_helper_a_test_runs_is_not_training_code():
    """nanotron's `tests/test_sft.py`: `_test_sft_loss_masking`, run by a test in each process,
    is named like a loss but checks one."""
    source = """
        import torch

        def _test_sft_loss_masking(model, batch):
            loss_all = model(batch.cuda()).mean()
            assert loss_all > 0, "Full mask should produce positive loss"
    """
    assert _found(source, "tests/test_sft.py") == set()
    assert (5, "PFL207") in _found(source.replace("_test_sft_loss_masking", "sft_loss_masking"), "train.py")


def test_the_split_a_loss_logs_under_is_a_string():
    """taming-transformers' `BCELossWithQuant.forward(self, qloss, target, prediction, split)`:
    `"{}/bce_loss".format(split)` formats the split's name; a tensor formatted is reported."""
    source = """
        import torch
        import torch.nn.functional as F

        class BCELossWithQuant(torch.nn.Module):
            def forward(self, qloss, target, prediction, {param}):
                loss = F.binary_cross_entropy_with_logits(prediction, target) + qloss
                return loss, {{"{{}}/total_loss".format({param}): loss.detach().mean()}}
    """
    assert _found(source.format(param="split")) == set()
    assert (7, "PFL210") in _found(source.format(param="scale"))


def test_a_move_to_the_cpu_whose_result_is_dropped_moves_a_module():
    """Open-Sora's offloading: `optional_models["img_flux"].to("cpu", dtype)` as a statement
    moves a module in place; a tensor's copy would be thrown away. Kept, it is a copy."""
    source = """
        import torch

        def main(models, loader, device, dtype):
            for batch in loader:
                out = models["video"](batch.to(device))
                models["img_flux"].to("cpu", dtype)
                {keep}
    """
    assert (6, "PFL203") not in _found(source.format(keep="pass"))
    assert (7, "PFL203") in _found(source.format(keep='saved = models["img_flux"].to("cpu")'))


def test_the_fields_of_a_structure_moved_to_the_host_are_on_the_host():
    """pytorchvideo's detection tutorial: `predictor(img)["instances"].to("cpu")` moves
    detectron2's `Instances` (boxes, scores, classes) to the host; `.pred_classes.tolist()`
    then reads host memory. Not moved, the same read waits for the GPU."""
    source = """
        import torch

        def run(predictor, loader):
            for img in loader:
                predictions = predictor(img.cuda())["instances"]{move}
                classes = predictions.pred_classes.tolist()
    """
    assert (6, "PFL202") not in _found(source.format(move='.to("cpu")'))
    assert (6, "PFL202") in _found(source.format(move=""))


def test_an_optimizer_closure_runs_every_step_and_a_message_thunk_does_not():
    """composer's `self.optimizer.step(closure=lambda **kwargs: self._train_microbatches(
    batch, **kwargs).item())`: the optimizer calls its closure every step. A lambda handed
    to anything else (a message thunk, called only when a check fails) is not per-step."""
    source = """
        import torch

        def train(model, loader, optimizer):
            for batch in loader:
                loss = model(batch.cuda()).mean()
                optimizer.step(closure=lambda: loss.item())
                torch._check(bool(batch.shape[0]), lambda: f"empty batch {loss.item()}")
    """
    found = _found(source)
    assert (6, "PFL201") in found
    assert (7, "PFL201") not in found


def test_a_branch_for_another_accelerator_is_not_a_cuda_step():
    """yolov9's NMS and demucs' HTDemucs: `mps = "mps" in device.type; if mps: prediction =
    prediction.cpu()` runs on Apple GPUs only. A branch for a batch still on the CPU
    (`device.type == "cpu"`) may well run in a CUDA step, and the copy outside any branch
    runs every step."""
    source = """
        import torch

        def nms(prediction, keep):
            device = prediction.device
            mps = "mps" in device.type
            if mps:
                prediction = prediction.cpu()
            if prediction.device.type == "xla":
                keep = keep.cpu()
            if keep.device.type == "cpu":
                prediction = prediction.cpu()
            return prediction[:, :4].cpu(), keep

        class Model(torch.nn.Module):
            def forward(self, x):
                return nms(x, x[:, 0])
    """
    found = _found(source)
    assert (7, "PFL203") not in found and (9, "PFL203") not in found
    assert (11, "PFL203") in found and (12, "PFL203") in found
