"""`perflint trace`: the click command (imports torch only when it runs).

Exit status:
  0  the program ran (to its end, or to a trace limit) and no sync was reported
  1  syncs were reported (0 with --exit-zero)
  2  usage or internal error: bad options, no such script or module, torch not installed
  3  the program failed: an uncaught exception (its traceback is printed to stderr) or a
     non-zero `sys.exit(n)`; the report still lists what was traced until then, and the
     summary gives the program's own exit status
  130  the program was interrupted (Ctrl-C)
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from ..harness.command import INSTALL_HINT, torch_available
from .limits import Limits
from .output import HUMAN_FORMATS, available_formats, render
from .program import COMPLETED, CRASHED, EXITED, INTERRUPTED, STOPPED, Program, ProgramNotFound
from .sites import RUNTIME_CODE, Site, acknowledges, site_diagnostic, write_trace

EXIT_CLEAN, EXIT_SYNCS, EXIT_ERROR, EXIT_PROGRAM_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _fail(message: str) -> None:
    click.echo(f"perflint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


@click.command("trace", context_settings={"allow_interspersed_args": False,
                                          "help_option_names": ["-h", "--help"]})
@click.option("-m", "--module", is_flag=True,
              help="Run SCRIPT as a module, as `python -m SCRIPT` would (the working directory comes first on sys.path).")
@click.option("--output-format", type=click.Choice(available_formats()), default="concise", show_default=True,
              help="How the traced syncs are printed (the formats of `perflint check`).")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report to this file instead of stdout.")
@click.option("--save", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="TRACE.json",
              help="Also write the trace (every site, the program's status, the limits) for `perflint check --trace`.")
@click.option("--steps", type=click.IntRange(1, None), default=None, metavar="N",
              help="Stop the program after N optimizer steps (`optimizer.step()` calls, all optimizers).")
@click.option("--max-events", type=click.IntRange(1, None), default=None, metavar="N",
              help="Stop the program at the N-th sync event.")
@click.option("--max-seconds", type=click.FloatRange(0, None, min_open=True), default=None, metavar="S",
              help="Stop the program after S seconds of running.")
@click.option("--include-libraries", is_flag=True,
              help="Attribute syncs to the first frame outside torch, even in installed libraries (default: the first frame in your code).")
@click.option("--cpu-means-accelerator/--cpu-means-host", default=True, show_default=True,
              help="CPU build only: whether CPU device arguments stand for the accelerator (scripts pick `cpu` where a GPU machine picks `cuda`).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when syncs were found (a failing program still exits 3).")
@click.option("-q", "--quiet", is_flag=True, help="Print the report only, no summary.")
@click.argument("script", metavar="SCRIPT")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
def trace(module: bool, output_format: str, output_file: Path | None, save: Path | None, steps: int | None,
          max_events: int | None, max_seconds: float | None, include_libraries: bool, cpu_means_accelerator: bool,
          exit_zero: bool, quiet: bool, script: str, args: tuple[str, ...]) -> None:
    """Run SCRIPT (or `-m MODULE`) with ARGS in this process and report the host-device syncs it performs.

    Each sync is attributed to the line of your code that caused it, counted, and marked as
    happening once or every step. Without a GPU the accelerator is simulated (see
    docs/trace.md). Options go before SCRIPT; everything after it is the program's.
    """
    if not torch_available():
        click.echo(INSTALL_HINT.replace("perflint bench", "perflint trace"), err=True)
        sys.exit(EXIT_ERROR)
    from .tracer import TraceOptions, trace_program

    program = Program(script, args, module=module)
    try:
        program.check()
    except ProgramNotFound as exc:
        _fail(str(exc))
    options = TraceOptions(Limits(steps, max_events, max_seconds), include_libraries=include_libraries,
                           cpu_means_accelerator=cpu_means_accelerator)
    to_stdout = output_file is None
    human = output_format in HUMAN_FORMATS
    # A machine-readable report on stdout must not be mixed with the program's prints.
    around = (lambda: contextlib.redirect_stdout(sys.stderr)) if to_stdout and not human else None
    try:
        result = trace_program(program, options, around_run=around)
    except Exception as exc:  # an internal error: one line, exit 2
        _fail(f"internal error: {type(exc).__name__}: {exc}")
        return
    sys.stdout.flush()
    outcome = result.outcome
    if outcome.traceback:
        click.echo(outcome.traceback, err=True, nl=False)
    if outcome.exit_message:
        click.echo(outcome.exit_message, err=True)
    shown, acknowledged = visible_sites(result.sites)
    diagnostics = [site_diagnostic(site, result.total_steps) for site in shown]
    text = render(output_format, diagnostics)
    summary = summary_text(result, shown, acknowledged)
    if human and not quiet:
        text += summary
    try:
        if output_file is not None:
            output_file.parent.mkdir(parents=True, exist_ok=True)
            output_file.write_text(text, encoding="utf-8")
        else:
            click.echo(text, nl=False)
        if not human and not quiet:
            click.echo(summary, nl=False, err=True)
        if save is not None:
            write_trace(save, result.to_json())
            if not quiet:
                click.echo(f"perflint trace: wrote {save}", err=True)
    except OSError as exc:
        _fail(f"cannot write {exc.filename or 'the report'}: {exc.strerror or exc}")
    sys.exit(exit_code(outcome.kind, bool(diagnostics), exit_zero))


def exit_code(outcome: str, found: bool, exit_zero: bool) -> int:
    if outcome == INTERRUPTED:
        return EXIT_INTERRUPTED
    if outcome in (CRASHED, EXITED):
        return EXIT_PROGRAM_FAILED
    return EXIT_SYNCS if found and not exit_zero else EXIT_CLEAN


def visible_sites(sites: list[Site]) -> tuple[list[Site], int]:
    """The sites to report, and how many are hidden by a `# noqa` for PFL901 or a sync rule."""
    from ..noqa import parse_suppressions

    noqa: dict[str, Any] = {}
    shown: list[Site] = []
    hidden = 0
    for site in sites:
        if site.file not in noqa:
            try:
                text = Path(site.file).read_text(encoding="utf-8") if not site.file.startswith("<") else ""
            except (OSError, UnicodeDecodeError):
                text = ""
            noqa[site.file] = parse_suppressions(text)
        suppressions = noqa[site.file]
        comment = suppressions.lines.get(site.line)
        if suppressions.file_exempt(RUNTIME_CODE) or (comment is not None and acknowledges(comment.codes)):
            hidden += 1
        else:
            shown.append(site)
    return shown, hidden


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary_text(result: Any, shown: list[Site], acknowledged: int) -> str:
    outcome, command = result.outcome, f"`{result.program.describe()}`"
    steps = f"{_plural(result.total_steps, 'optimizer step')}, {result.seconds:.1f} s"
    if outcome.kind == COMPLETED:
        first = f"Traced {command}: completed, exit status 0 ({steps})."
    elif outcome.kind == STOPPED:
        first = f"Traced {command}: stopped by {result.stop_reason} ({steps}); the program did not finish."
    elif outcome.kind == EXITED:
        first = f"Traced {command}: the program exited with status {outcome.status} ({steps})."
    elif outcome.kind == INTERRUPTED:
        first = f"Traced {command}: interrupted ({steps}); what ran until then is reported."
    else:
        first = (f"Traced {command}: the program raised {outcome.exception} (exit status {outcome.status}, "
                 f"traceback above; {steps}); what ran until then is reported.")
    lines = [first]
    if shown:
        syncs = sum(site.count for site in shown)
        places = {(site.file, site.line) for site in shown}
        every = {(site.file, site.line) for site in shown if site.every_step}
        repeated = {(site.file, site.line) for site in shown if site.per_step} - every
        once = places - every - repeated
        kinds = [f"{len(every)} every step" if result.total_steps > 1 else f"{len(every)} repeatedly"]
        if result.total_steps > 1:
            kinds.append(f"{len(repeated)} in some steps")
        kinds.append(f"{len(once)} once")
        lines.append(f"Found {_plural(syncs, 'sync')} at {_plural(len(places), 'line')}: {', '.join(kinds)}.")
    else:
        lines.append("No syncs found.")
    if acknowledged:
        lines.append(f"Not shown: {_plural(acknowledged, 'site')} acknowledged with `# noqa`.")
    if result.mode == "simulated":
        where = ("CPU device arguments stand for the accelerator"
                 if result.options.cpu_means_accelerator else "only non-CPU devices, `.cuda()` and parameters do")
        lines.append(f"No GPU: the accelerator was simulated on the CPU build ({where}); see docs/trace.md.")
    return "\n".join(lines) + "\n"
