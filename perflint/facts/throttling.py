"""Throttled tests: the `if` tests and early exits under which the rest of a training step
runs every N steps, not every step (`if step % 100 == 0:`, `if not is_log_step: continue`,
`if self.should_log:`, once per StyleGAN tick). Shape tests only, like `hotness`.
"""

from __future__ import annotations

import ast
import re
from typing import Collection, Iterable

from .hotness import receiver_name, terminates
from .syntax import dotted, walk_nodes

# `if control.should_log:` (Hugging Face's TrainerControl, set every `logging_steps`)
_THROTTLING_FLAGS = ("should_log", "should_eval", "should_save")
# ... and `is_save_iter(args, iteration)`, `should_checkpoint(step)`, `needs_printing()`
# (SPADE's IterationCounter): helpers that say whether this is one of the steps that save,
# evaluate, display or log
_THROTTLING_CALLS = _THROTTLING_FLAGS + ("is_log", "every_n_", "end_of_epoch", "should_", "is_save",
                                         "is_eval", "is_val", "is_checkpoint", "is_ckpt", "needs_print",
                                         "needs_sav", "needs_display", "needs_log", "needs_eval")
_LAST_STEP_CHECK = re.compile(r"is_last_(?:train_|val_|test_)?(?:iter|epoch|step|batch)")


def _is_mod_zero(node: ast.AST, every_step: Collection[str] = ()) -> bool:
    """`step % n == 0`, `not step % n` (`every_step`: names of intervals known to be 1)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return isinstance(node.operand, ast.BinOp) and isinstance(node.operand.op, ast.Mod) \
            and not _by_one(node.operand, every_step)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        sides = (node.left, node.comparators[0])
        has_mod = any(isinstance(s, ast.BinOp) and isinstance(s.op, ast.Mod) and not _by_one(s, every_step)
                      for s in sides)
        # `step % 100 == 0`, and `step % 100 == 99` (the last step of each hundred), or
        # `total_steps % opt.print_freq == print_delta` (an offset kept in a variable: pix2pixHD)
        has_constant = any(isinstance(s, ast.Constant) and type(s.value) is int
                           or isinstance(s, (ast.Name, ast.Attribute)) for s in sides)
        return has_mod and has_constant
    return False


def _due_test(node: ast.expr) -> bool:
    """`step % n == 0`, or that and more (`interval is not None and step % interval == 0`,
    allennlp's `_should_log_distributions_this_batch`): true only on a due step."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return any(_due_test(value) for value in node.values)
    return _is_mod_zero(node)


def _by_one(mod: ast.BinOp, every_step: Collection[str]) -> bool:
    """`step % 1`, or `iter_num % log_interval` where the module sets `log_interval = 1`
    (lit-llama's and nanoGPT's defaults): the remainder is always 0, the test always true."""
    right = mod.right
    if isinstance(right, ast.Constant):
        return type(right.value) is int and right.value == 1
    return isinstance(right, ast.Name) and right.id in every_step


def unit_intervals(tree: ast.Module) -> frozenset[str]:
    """Module-level names bound once, to the int 1, and never rebound by a `global` statement:
    a `% name == 0` test on one of them is true on every step."""
    bound: dict[str, int] = {}
    for stmt in tree.body:
        for target, value in _module_bindings(stmt):
            bound[target] = bound.get(target, 0) + 1 if value == 1 else 2
    names = {name for name, count in bound.items() if count == 1}
    if names:
        for node in walk_nodes(tree):
            if isinstance(node, ast.Global):
                names.difference_update(node.names)
    return frozenset(names)


def _module_bindings(stmt: ast.stmt) -> Iterable[tuple[str, object]]:
    """(name, the int it is bound to, else None) for each name a module statement binds."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        constant = value.value if isinstance(value, ast.Constant) and type(value.value) is int \
            and not isinstance(stmt, ast.AugAssign) else None
        for target in targets:
            for name in walk_nodes(target):
                if isinstance(name, ast.Name):
                    yield name.id, constant if isinstance(target, ast.Name) else None
    elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.If, ast.Try, ast.While)):
        for node in walk_nodes(stmt):  # bound in a block: not one known constant
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                yield node.id, None


def _is_rare_condition(node: ast.expr) -> bool:
    """A flag (`last_step`, `self.is_last_batch`), an equality (`i == n - 1`), or a
    conjunction with one (`epoch == 2 and i == 999`): true on a few steps, not on every one."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return True
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return any(_is_rare_condition(v) or is_throttled_test(v) for v in node.values)
    return isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)


def is_throttled_test(node: ast.expr, flags: Collection[str] = (), every_step: Collection[str] = ()) -> bool:
    """`if step % 100 == 0:` and friends: the body runs every N steps, not every step.
    `flags`: local names assigned such a test (`is_log_step = step % n == 0`), and the
    module's functions that return one (`throttling_helpers`); `every_step`: the module's
    intervals set to 1 (`unit_intervals`)."""
    if _is_mod_zero(node, every_step):
        return True
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return any(is_throttled_test(v, flags, every_step) for v in node.values)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        # `if step % 100 == 0 or last_step:` / `... or i == len(loader) - 1`: every N steps
        # and once at the end
        return any(is_throttled_test(v, flags, every_step) for v in node.values) and \
            all(is_throttled_test(v, flags, every_step) or _is_rare_condition(v) for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in flags:
        return True  # `if divisible_by(step, n):`, a helper that returns such a test
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
            and f"self.{node.func.attr}" in flags:
        return True  # `if self.check_frequency(idx):`, a method that returns one
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        name = receiver_name(node.func).lower()
        # `self.every_n_train_iters(runner, 50)`, `self.end_of_epoch(runner, batch_idx)`,
        # `self.is_last_train_iter(runner)`: mmengine's and mmcv's hook helpers
        return name.startswith(_THROTTLING_CALLS) or bool(_LAST_STEP_CHECK.match(name))
    if isinstance(node, ast.Name) and node.id in flags:
        return True
    if isinstance(node, (ast.Name, ast.Attribute)):
        # `if control.should_log:` (Hugging Face's TrainerControl, set every `logging_steps`)
        return receiver_name(node).lower().startswith(_THROTTLING_FLAGS)
    return _is_timed(node)


def skips_unless_throttled(stmt: ast.stmt, flags: Collection[str] = (), every_step: Collection[str] = ()) -> bool:
    """`if total_steps % self.checkpoint_every: return`, `if step % n != 0: continue`, `if not
    is_log_step: return`: what follows in the block runs every n steps, not every step. Also
    an `if`/`else` each of whose branches leaves unless due, or is taken on the first step
    only (sd-scripts' `sample_images`: `if steps == 0: <return unless sample_at_first>` `else:
    <return unless steps % n == 0>`)."""
    if not isinstance(stmt, ast.If):
        return False
    if stmt.orelse:
        return (_on_first_step_only(stmt.test) or _block_skips(stmt.body, flags, every_step)) \
            and _block_skips(stmt.orelse, flags, every_step)
    if terminates(stmt.body) not in (ast.Return, ast.Continue):
        return False
    # `if steps % n != 0 or epoch is not None: return`: any reason to leave is enough
    tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.Or) \
        else [stmt.test]
    return any(_is_mod_nonzero(test, every_step) or (
        isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        and is_throttled_test(test.operand, flags, every_step)) or _skips_until_due(test) for test in tests)


def _block_skips(block: list[ast.stmt], flags: Collection[str], every_step: Collection[str]) -> bool:
    """Whether leaving `block` at its end means the throttle let it through (or it never ends)."""
    return terminates(block) in (ast.Return, ast.Continue) \
        or any(skips_unless_throttled(stmt, flags, every_step) for stmt in block)


# a step counter compared with 0: `if steps == 0:`, `if global_step == 0:`
_STEP_COUNTER = re.compile(r"(?:^|_)(?:steps?|iters?|iterations?|it|i|idx|tick|nimg)$")


def _on_first_step_only(test: ast.expr) -> bool:
    """`steps == 0`, `global_step == 0`: true on the first step of training only."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    counter, bound = test.left, test.comparators[0]
    return isinstance(bound, ast.Constant) and type(bound.value) is int and bound.value == 0 \
        and isinstance(counter, (ast.Name, ast.Attribute)) \
        and bool(_STEP_COUNTER.search(receiver_name(counter).lower()))


def _skips_until_due(test: ast.expr) -> bool:
    """`if (not done) and (cur_tick != 0) and (cur_nimg < tick_start_nimg + kimg_per_tick * 1000):
    continue` (the StyleGAN / EDM training loops' "maintenance once per tick"), `if step <
    next_log_step: continue`: the rest runs when the counter reaches the next threshold, or on
    the first or the last step."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    due = [p for p in parts if _not_yet_due(p)]
    return bool(due) and all(p in due or _rarely_false(p) for p in parts)


def _not_yet_due(node: ast.expr) -> bool:
    """`count < start + interval`, `step < next_eval`, `next_log > step`."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return False
    op, left, right = node.ops[0], node.left, node.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)):
        left, right = right, left
    elif not isinstance(op, (ast.Lt, ast.LtE)):
        return False
    if not isinstance(left, (ast.Name, ast.Attribute)):
        return False
    if isinstance(right, ast.BinOp) and isinstance(right.op, ast.Add):
        return True
    return isinstance(right, (ast.Name, ast.Attribute)) and receiver_name(right).lower().startswith("next_")


def _rarely_false(node: ast.expr) -> bool:
    """`not done`, `not self.last_step` (false on the last step), `cur_tick != 0`, `step > 0`
    (false on the first)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return isinstance(node.operand, (ast.Name, ast.Attribute))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.NotEq, ast.Gt)):
        bound = node.comparators[0]
        return isinstance(bound, ast.Constant) and bound.value == 0
    return False


def _is_mod_nonzero(node: ast.expr, every_step: Collection[str] = ()) -> bool:
    """`step % n` (true off the n-th steps) and `step % n != 0`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return not _by_one(node, every_step)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.NotEq):
        sides = (node.left, node.comparators[0])
        return any(isinstance(s, ast.BinOp) and isinstance(s.op, ast.Mod) and not _by_one(s, every_step)
                   for s in sides) \
            and any(isinstance(s, ast.Constant) and type(s.value) is int for s in sides)
    return False


# `time.time() - last_log > args.log_interval`, `elapsed > cfg.eval_every_seconds`: a clock
_CLOCK_CALLS = ("time.time", "time.perf_counter", "time.monotonic", "perf_counter", "monotonic")
_DURATION_NAME = re.compile(r"(?:^|_)(?:elapsed|seconds|secs|minutes|mins|hours)$")


def _is_timed(node: ast.expr) -> bool:
    """A comparison against a clock or a duration: the body runs every so often, not every
    step (`if time.time() - last > 60:`, `if eval_delta > cfg.eval_every_seconds:`)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE))):
        return False
    for side in (node.left, node.comparators[0]):
        for part in walk_nodes(side):
            if isinstance(part, ast.Call) and dotted(part.func) in _CLOCK_CALLS:
                return True
            if isinstance(part, (ast.Name, ast.Attribute)) and _DURATION_NAME.search(receiver_name(part).lower()):
                return True
            if _time_since_last(part):
                return True
    return False


_LAST_MARK = re.compile(r"(?:last|prev|previous|start)")


def _time_since_last(node: ast.AST) -> bool:
    """`current_time - last_logging` (vicreg), `now_time - self.prev_log`: a time read this
    step minus the one of the last time the block ran."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and all(isinstance(s, (ast.Name, ast.Attribute)) for s in (node.left, node.right))):
        return False
    now, then = receiver_name(node.left).lower(), receiver_name(node.right).lower()
    return "time" in now and bool(_LAST_MARK.match(then))


def throttling_helpers(functions: Iterable[ast.AST],
                       prefix: str = "") -> frozenset[str]:
    """The names (after `prefix`, "self." for methods) of functions that return a throttled
    test: `def divisible_by(num, den): return (num % den) == 0`, or latent-diffusion's
    `ImageLogger.check_frequency(idx)`, which returns True only under `if idx % self.freq ==
    0 ...:` and False otherwise. Calling one is that test."""
    names = set()
    for func in functions:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = func.body[1:] if func.body and isinstance(func.body[0], ast.Expr) \
            and isinstance(func.body[0].value, ast.Constant) else func.body  # a docstring
        body = [stmt for stmt in body if not isinstance(stmt, ast.Assert)]  # `assert self.trainer is not None`
        if (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
                and _due_test(body[0].value)) or _true_only_when_due(body, due=False) is True:
            names.add(prefix + func.name)
    return frozenset(names)


def _true_only_when_due(body: list[ast.stmt], due: bool) -> bool | None:
    """Whether `body` returns only the constants True and False, True only inside an `if`
    whose test has a `% n == 0` (`due`): True when it returns True that way, False when
    some return breaks the shape, None when it returns no True."""
    found: bool | None = None
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.Return):
            value = stmt.value
            if not (isinstance(value, ast.Constant) and type(value.value) is bool):
                return False
            if value.value:
                if not due:
                    return False
                found = True
            continue
        for field, block in ast.iter_fields(stmt):
            if not (isinstance(block, list) and block and isinstance(block[0], ast.stmt)):
                continue
            inner_due = due or (isinstance(stmt, ast.If) and field == "body"
                                and any(_is_mod_zero(n) for n in walk_nodes(stmt.test)))
            result = _true_only_when_due(block, inner_due)
            if result is False:
                return False
            found = found or result
        for handler in getattr(stmt, "handlers", ()):
            result = _true_only_when_due(handler.body, due)
            if result is False:
                return False
            found = found or result
    return found
