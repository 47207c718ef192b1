"""What the analysis records about each function, class and loop of a file.

Plain records: `FileFacts` fills them in while it collects the file's definitions, the
walkers while they interpret bodies (summaries, callers' arguments, step markers), and
`hot_regions` reads them to decide what runs every step.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable

from .environment import Env
from .values import NONE, Kind, Value, seq_of

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
# Why code runs every step: (row, what) steps from the entry point down ("loop over
# batches in `train`", "calls `helper`").
HotChain = tuple[tuple[int, str], ...]

# The two passes (see `analysis`): callee-first summaries, then the caller-first report.
SUMMARY = 1
REPORT = 2


@dataclass(eq=False)
class ClassInfo:
    name: str
    node: ast.ClassDef
    base_names: list[str]
    local_bases: list[ClassInfo] = field(default_factory=list)
    attrs: dict[str, Value] = field(default_factory=dict)
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    top_level: bool = False  # defined at module level: other files can import it
    is_module: bool = False
    is_loss: bool = False
    is_optimizer: bool = False
    is_scheduler: bool = False  # LR and diffusion schedulers: `step()` runs every step
    is_metric: bool = False  # torchmetrics / ignite metrics: `update()` runs every batch
    # A Dataset or a data transform: it runs on the CPU, in DataLoader workers, not in the step
    is_data_pipeline: bool = False
    is_autograd_function: bool = False

    def lineage(self) -> Iterable[ClassInfo]:
        """This class and its bases defined in the same file (each once)."""
        seen: set[int] = set()
        stack: list[ClassInfo] = [self]
        while stack:
            cls = stack.pop()
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            yield cls
            stack.extend(cls.local_bases)

    def lookup_attr(self, name: str) -> Value | None:
        return next((c.attrs[name] for c in self.lineage() if name in c.attrs), None)

    def lookup_method(self, name: str) -> FunctionInfo | None:
        return next((c.methods[name] for c in self.lineage() if name in c.methods), None)

    def instance(self) -> Value:
        kind = Kind.MODULE if self.is_module else Kind.OBJECT
        return Value(kind, ref=self.name, loss=self.is_loss)


@dataclass(eq=False)
class FunctionInfo:
    name: str
    node: FunctionNode | ast.Module
    cls: ClassInfo | None = None
    parent: FunctionInfo | None = None
    decorators: frozenset[str] = frozenset()
    returns: Value = NONE
    yields: Value | None = None
    # `yield from loader` (in `while True:`): iterating the generator iterates the loader
    yields_from: Value | None = None
    arg_values: dict[str, Value] = field(default_factory=dict)  # what callers pass (report pass)
    # What callers pass, as seen by the summary pass: a fallback for callers that the report
    # pass does not walk (cold code without loops, such as `main()`).
    summary_arg_values: dict[str, Value] = field(default_factory=dict)
    callees: list[FunctionInfo] = field(default_factory=list)
    hot: bool = False
    hot_reason: str = ""
    # The parameters that this file's hot calls of it pass (None: no hot call seen): where
    # hot only through them, a parameter none of them passes holds its default.
    hot_passed: set[str] | None = None
    # Why it is hot, from the entry point down: (row, what) steps, the entry first; and the
    # function of this file that other files seed, when that is the entry (its callers'
    # chains live in their files: `perflint.hot_paths` joins them).
    hot_chain: HotChain = ()
    hot_seed: str | None = None
    has_loop: bool = False  # a loop statement or a comprehension
    has_statement_loop: bool = False  # a `for` / `while` statement
    # A framework calls it every iteration, as this file registers it: "ignite `Engine`
    # runs `train_step` every iteration" (see `dispatch`)
    registered_hot: str = ""
    # A generator that hot code advances with `next()` (see `dispatch`): the chain to that
    # call. The loop that yields runs every step, not what comes before it.
    advanced_by_next: tuple[HotChain, str | None] | None = None
    local_calls: int = 0  # calls in this file (summary pass)
    foreign_callers: bool = False  # other files call it every step (the project pass)
    opaque_calls: bool = False  # one of them passes `*args` / `**kwargs`
    # Outside its own loops it runs the model, the backward pass or an optimizer step (or
    # calls a function that does): a loop calling it is a training / inference loop.
    steps: bool = False
    # ... and among those, outside its loops, it runs the backward pass or steps the
    # optimizer itself: one call is one training step, whoever calls it (a registry, a
    # framework, a callback list).
    trains: bool = False
    # It contains a loop over data or a training loop of its own: calling it runs many
    # steps (an epoch, an evaluation), it is not one step. (A loss looping over scales and
    # calling loss modules does not count: that is not a loop over steps.)
    loops_steps: bool = False
    # Outside its loops it loads a model or weights (`torch.load`, `from_pretrained`): one
    # call is a whole run (an export, an evaluation), not one step.
    loads_model: bool = False
    summary_state: int = 0  # 0 = not started, 1 = in progress, 2 = done
    report_walks: int = 0
    walked_hot: bool = False
    env: Env | None = None  # final environment of the report pass (closures read it)
    summary_env: Env | None = None

    @property
    def display_name(self) -> str:
        """`Class.method` or `function`, as messages name it."""
        return f"{self.cls.name}.{self.name}" if self.cls is not None else self.name

    @property
    def is_method(self) -> bool:
        return self.cls is not None and "staticmethod" not in self.decorators

    @property
    def result(self) -> Value:
        if self.yields_from is not None:
            return self.yields_from
        if self.yields is not None:
            return seq_of(self.yields)
        return self.returns


@dataclass(eq=False)
class LoopInfo:
    node: ast.AST
    data: bool
    direct_markers: bool = False
    train_markers: bool = False  # backward(), optimizer.step(), next(batches) in its own body
    update_markers: bool = False  # backward() or optimizer.step() in its own body
    updates: int = 0  # backward passes and optimizer steps its pre-walk saw, nested code included
    nested_markers: bool = False
    root_hot: bool = False  # this loop is what makes its region hot
    nested_data: bool = False  # a loop inside iterates a data loader: this one is an epoch loop
    counters: frozenset[str] = frozenset()  # `i` in `for i, b in enumerate(...)`, `for i in range(n)`
    targets: frozenset[str] = frozenset()  # every name the loop binds
    # containers whose every element the loop moves to the accelerator
    # (`for i in range(len(xs)): xs[i] = xs[i].cuda()`): what each holds after the loop
    moved_elements: dict[str, Value] = field(default_factory=dict)
