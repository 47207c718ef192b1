"""Framework hooks and callbacks that run every step: which methods mmengine, mmcv,
Lightning, Hugging Face's Trainer, fastai, ClassyVision and ignite call once per iteration,
by the kind of base class (or event) they are registered with. Name tables and shape tests
only, like `hotness`.
"""

from __future__ import annotations

import ast
from typing import Iterable

from .hotness import receiver_name
from .syntax import dotted, walk_nodes

# ----------------------------------------------------------------- hooks and callbacks
# Methods that training frameworks call on their hook and callback objects once per
# iteration (a batch, an optimizer step), by the kind of base class they are defined on.
# Per-epoch and per-run methods (`after_train_epoch`, `after_run`, `on_train_epoch_end`,
# `on_log`, `on_evaluate`, `on_save`) are not here: they stay cold.
_MMENGINE_ITER_HOOKS = frozenset(  # mmengine.hooks.Hook (and mmcv's, which has the same)
    """before_train_iter after_train_iter before_val_iter after_val_iter before_test_iter
    after_test_iter _before_iter _after_iter""".split()
)
_MMCV_ITER_HOOKS = frozenset({"before_iter", "after_iter"})  # mmcv.runner.Hook
_DETECTRON2_STEP_HOOKS = frozenset({"before_step", "after_step", "after_backward"})  # HookBase
# Classy Vision's `ClassyHook` (and vissl's hooks on it): `task.run_hooks(name)` every step
_CLASSY_STEP_HOOKS = frozenset({"on_step", "on_forward", "on_backward", "on_update", "on_loss_and_meter"})
_LIGHTNING_BATCH_HOOKS = frozenset(  # lightning.pytorch.Callback, and the LightningModule's own
    """on_train_batch_start on_train_batch_end on_validation_batch_start
    on_validation_batch_end on_test_batch_start on_test_batch_end on_predict_batch_start
    on_predict_batch_end on_before_backward on_after_backward on_before_optimizer_step
    on_before_zero_grad""".split()
)
_LIGHTNING_MODULE_STEP_HOOKS = _LIGHTNING_BATCH_HOOKS | frozenset(  # only a LightningModule's
    """on_before_batch_transfer on_after_batch_transfer transfer_batch_to_device
    optimizer_step optimizer_zero_grad backward""".split()
)
_HF_STEP_CALLBACKS = frozenset(  # transformers.TrainerCallback
    """on_step_begin on_step_end on_substep_end on_pre_optimizer_step on_optimizer_step
    on_prediction_step""".split()
)
_FASTAI_BATCH_CALLBACKS = frozenset(  # fastai.callback.core.Callback
    """before_batch after_pred after_loss before_backward after_backward before_step
    after_step after_batch""".split()
)
# A trainer subclass's per-iteration methods, which the base class's loop calls:
# YOLOX's `Trainer.before_iter/after_iter/train_one_iter`, detectron2's `TrainerBase.run_step`
# and its `before_step/after_step/after_backward` (which call the hooks).
_TRAINER_STEP_METHODS = frozenset(
    """before_iter after_iter train_one_iter run_step before_step after_step
    after_backward""".split()
)
# An environment's step, which an RL loop calls once per step: OpenAI baselines' and
# Stable-Baselines3's `VecEnv.step` calls `step_async` then `step_wait` (ikostrikov's
# `VecPyTorch` moves the actions and observations there); gym's wrappers' `step` calls
# `observation`, `reward` or `action`.
_VEC_ENV_STEP_METHODS = frozenset({"step", "step_async", "step_wait"})
_GYM_STEP_METHODS = frozenset({"step", "observation", "reward", "action"})
_GYM_WRAPPERS = frozenset({"ObservationWrapper", "RewardWrapper", "ActionWrapper"})
# (base kind, methods, what calls them, what one call is)
_EVERY_STEP_HOOKS = (
    ("hook", _MMENGINE_ITER_HOOKS, "mmengine hook", "iteration"),
    ("hook", _MMCV_ITER_HOOKS, "mmcv hook", "iteration"),
    ("hook", _DETECTRON2_STEP_HOOKS, "detectron2 hook", "step"),
    ("hook", _CLASSY_STEP_HOOKS, "Classy Vision hook", "step"),
    ("callback", _LIGHTNING_BATCH_HOOKS, "Lightning callback", "batch"),
    ("callback", _HF_STEP_CALLBACKS, "Hugging Face TrainerCallback", "step"),
    ("callback", _FASTAI_BATCH_CALLBACKS, "fastai callback", "batch"),
    ("lightning", _LIGHTNING_MODULE_STEP_HOOKS, "Lightning hook", "batch"),
    ("trainer", _TRAINER_STEP_METHODS, "trainer hook", "iteration"),
    ("vec_env", _VEC_ENV_STEP_METHODS, "vectorized environment", "environment step"),
    ("gym", _GYM_STEP_METHODS, "gym environment", "environment step"),
)
# Every method name above: what `getattr(hook, fn_name)(...)` may call every step.
EVERY_STEP_HOOK_METHODS = frozenset().union(*(methods for _, methods, _, _ in _EVERY_STEP_HOOKS))
# Lightning's own callbacks, which users subclass (their names do not end in "Callback").
_LIGHTNING_CALLBACKS = frozenset(
    """ModelCheckpoint EarlyStopping LearningRateMonitor BasePredictionWriter ProgressBar
    TQDMProgressBar RichProgressBar ModelSummary StochasticWeightAveraging""".split()
)


def hook_kinds(class_names: Iterable[str], base_names: Iterable[str]) -> frozenset[str]:
    """What kind of hook object a class is, from the names of its lineage (`class_names`:
    the class and its bases defined in the same file) and of the bases they name
    (`base_names`, as written: `Hook`, `mmengine.hooks.Hook`, `pl.Callback`): "hook"
    (mmengine, mmcv, detectron2), "callback" (Lightning, Hugging Face, fastai), "lightning"
    (a LightningModule), "trainer" (a subclass of a trainer whose loop calls its methods),
    "vec_env" and "gym" (an environment an RL loop steps)."""
    kinds = set()
    for name in [*class_names, *(b.rsplit(".", 1)[-1] for b in base_names)]:
        if name.endswith("Hook") or name == "HookBase":
            kinds.add("hook")
        elif name.endswith("Callback") or name in _LIGHTNING_CALLBACKS:
            kinds.add("callback")
    for base in base_names:
        last = base.rsplit(".", 1)[-1]
        if last == "LightningModule":
            kinds.add("lightning")
        elif last == "LightningDataModule":
            kinds.add("lightning_data")
        elif last.endswith("Trainer") or last == "TrainerBase":
            kinds.add("trainer")  # a base only: a trainer's own loop calls its own methods
        elif last.endswith(("VecEnv", "VecEnvWrapper")):
            kinds.add("vec_env")
        elif last in _GYM_WRAPPERS or (base.split(".", 1)[0] in ("gym", "gymnasium") and last in ("Wrapper", "Env")):
            kinds.add("gym")
    return frozenset(kinds)


# Lightning calls these for the loaders it iterates, and copies each of their batches to the
# module's device (`move_data_to_device(..., non_blocking=True)` from pageable memory unless
# the loader pins it).
_LIGHTNING_LOADER_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})


def feeds_the_device(method: str, kinds: frozenset[str], cls_node: ast.ClassDef) -> bool:
    """Are the loaders `method` returns iterated by a framework that moves their batches to
    the device: a LightningModule's or LightningDataModule's `train_dataloader()`, or the
    method its `__init__` installs as one (`self.train_dataloader = self._train_dataloader`,
    `self.val_dataloader = partial(self._val_dataloader, shuffle=False)`: latent-diffusion)?"""
    if not kinds & {"lightning", "lightning_data"}:
        return False
    return method in _LIGHTNING_LOADER_HOOKS or method in _installed_hooks(cls_node)


def _installed_hooks(cls_node: ast.ClassDef) -> set[str]:
    found = set()
    for node in walk_nodes(cls_node):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute)
                and node.targets[0].attr in _LIGHTNING_LOADER_HOOKS):
            continue
        value = node.value
        if isinstance(value, ast.Call) and value.args and dotted(value.func) in ("partial", "functools.partial"):
            value = value.args[0]
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            found.add(value.attr)
    return found


def every_step_hook(method: str, kinds: frozenset[str]) -> tuple[str, str] | None:
    """(what calls it, what one call is) when a framework calls `method` of a hook object
    of these `kinds` every iteration: ("mmengine hook", "iteration") for `after_train_iter`."""
    for kind, methods, framework, unit in _EVERY_STEP_HOOKS:
        if kind in kinds and method in methods:
            return framework, unit
    return None


# ignite: the events an `Engine` fires once per iteration. (`Events.ITERATION_COMPLETED(every=50)`
# is a call: it fires every 50 iterations.)
_IGNITE_ITERATION_EVENTS = frozenset(
    {"ITERATION_STARTED", "ITERATION_COMPLETED", "GET_BATCH_STARTED", "GET_BATCH_COMPLETED"})
IGNITE_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine",
                            "ignite.engine.DeterministicEngine", "ignite.engine.deterministic.DeterministicEngine"})


def is_every_iteration_event(node: ast.expr) -> bool:
    """`Events.ITERATION_COMPLETED`, `Events.ITERATION_STARTED | Events.EPOCH_COMPLETED`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return is_every_iteration_event(node.left) or is_every_iteration_event(node.right)
    return isinstance(node, ast.Attribute) and node.attr in _IGNITE_ITERATION_EVENTS \
        and receiver_name(node.value) == "Events"


def every_iteration_decorator(func: ast.AST) -> bool:
    """`@trainer.on(Events.ITERATION_COMPLETED)`: ignite calls the handler every iteration."""
    return isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "on"
        and d.args and is_every_iteration_event(d.args[0]) for d in func.decorator_list)


def every_iteration_handler(node: ast.Call) -> ast.expr | None:
    """The handler of `engine.add_event_handler(Events.ITERATION_COMPLETED, handler, ...)`."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "add_event_handler" and len(node.args) >= 2 \
            and is_every_iteration_event(node.args[0]):
        return node.args[1]
    return None
