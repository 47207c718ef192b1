"""`perflint bench`: the click command (imports torch only when it runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
# The README's command, word for word (a test compares them): torch pinned to the CPU build,
# so that pip does not fetch a multi-GB CUDA build.
INSTALL_COMMAND = 'pip install torch==2.13.0 && pip install ".[bench]"'
INSTALL_HINT = (
    "perflint bench needs PyTorch, which is an optional extra. Install it as the README says, in a\n"
    "checkout of perflint (torch is pinned to the CPU build; on a GPU machine, install the CUDA build\n"
    "of torch that matches your driver instead):\n"
    f"    {INSTALL_COMMAND}"
)


def _fail(message: str) -> None:
    click.echo(f"perflint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@click.command("bench")
@click.option("--rule", "rules", multiple=True, metavar="CODE",
              help="Rules to run (codes, prefixes or names; comma-separated or repeated). Default: all.")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
              help="cpu: check results and count syncs (no timing). cuda: also prove the syncs and time steps.")
@click.option("--output-format", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a PNG chart (speedups on a GPU; sync counts on a CPU). Needs matplotlib.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the run as JSON and merge it into rule_summaries.json there (e.g. docs/benchmarks).")
@click.option("--e2e", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Also run an end-to-end case: a directory with train.py and train_fixed.py.")
@click.option("--seeds", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Random inputs per rule for the result comparison.")
@click.option("--repeats", type=click.IntRange(7, None), default=7, show_default=True,
              help="Timed repeats per A/B comparison (CUDA).")
@click.option("--steps", type=click.IntRange(50, None), default=None,
              help="Steps per timed repeat (CUDA; default: the rule's, at least 50).")
@click.option("--sweep/--no-sweep", default=True, show_default=True,
              help="Sweep the GPU work size (T_gpu/T_cpu from 0.1 to 10) or time only at T_gpu ≈ T_cpu.")
def bench(rules: tuple[str, ...], device: str, output_format: str, plot: Path | None, output_dir: Path | None,
          e2e: Path | None, seeds: int, repeats: int, steps: int | None, sweep: bool) -> None:
    """Run each rule's benchmark pair: same results, fewer syncs; on CUDA, proof and step times."""
    if not torch_available():
        click.echo(INSTALL_HINT, err=True)
        sys.exit(EXIT_ERROR)
    from perflint.registry import SelectorError, all_rules, is_pattern_rule, resolve_rules

    from .plot import MISSING, matplotlib_available

    if plot is not None and not matplotlib_available():
        _fail(MISSING)
    selectors = [s.strip() for value in rules for s in value.split(",") if s.strip()]
    try:
        chosen = resolve_rules(selectors) if selectors else all_rules()
    except SelectorError as exc:
        _fail(str(exc))
        return
    selected = [r for r in chosen if is_pattern_rule(r)]  # meta and run-time rules have no pattern
    without = [r.code for r in selected if r.benchmark is None]
    if selectors and without:
        _fail(f"no benchmark pair for {', '.join(without)}")

    from . import report
    from .cuda import DEFAULT_RATIOS
    from .runner import DeviceUnavailable, resolve_device, run_bench

    try:
        target = resolve_device(device)
    except DeviceUnavailable as exc:
        _fail(str(exc))
        return
    if target.type == "cpu":
        click.echo("perflint bench: CPU run: checking results and counting syncs; no speed is measured on a CPU.",
                   err=True)
    run = run_bench(selected, target, seeds=tuple(range(seeds)), repeats=repeats, steps=steps,
                    ratios=DEFAULT_RATIOS if sweep else (1.0,), e2e=e2e,
                    progress=lambda line: click.echo(f"perflint bench: {line}", err=True))
    click.echo(report.render(run, output_format), nl=False)
    if output_dir is not None:
        for path in report.write_outputs(run, output_dir):
            click.echo(f"perflint bench: wrote {path}", err=True)
    if plot is not None:
        from .plot import plot_run

        click.echo(f"perflint bench: wrote {plot_run(run, plot)}", err=True)
    sys.exit(EXIT_OK if run["passed"] else EXIT_FAILED)
