"""`perflint trace`: running programs in-process, attribution, limits, outcomes, output.

Programs are small scripts written to a temporary directory and traced in this process
(torch is already imported, so each trace takes a fraction of a second). On this CPU build
the accelerator is simulated: tensors created with `device=device` (a CPU device standing
for the accelerator) and parameters live "on the accelerator".
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint.cli import main
from perflint.trace import Limits, Program, TraceOptions, trace_program
from perflint.trace.limits import Stopper, TraceStopped

pytestmark = pytest.mark.torch

PRELUDE = """\
import torch

device = torch.device("cpu")
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_step():
    x = torch.randn(8, 4, device=device)
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()
"""


def write(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if source.startswith(PRELUDE):  # the body after the prelude is indented in the test
        source = PRELUDE + textwrap.dedent(source[len(PRELUDE):])
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def line_of(path: Path, marker: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    (found,) = [i for i, line in enumerate(lines, 1) if marker in line]
    return found


def trace(directory: Path, target: str, *args: str, module: bool = False, **options):
    return trace_program(Program(target, args, module=module, cwd=directory), TraceOptions(**options))


def by_line(result) -> dict[tuple[str, int], list]:
    found: dict[tuple[str, int], list] = {}
    for site in result.sites:
        found.setdefault((os.path.basename(site.file), site.line), []).append(site)
    return found


# ----------------------------------------------------------------------------- attribution
def test_syncs_in_helpers_and_an_imported_module_are_attributed_to_their_lines(tmp_path):
    helpers = write(tmp_path, "trace_helpers_a.py", """\
        import torch


        def accuracy(logits, labels):
            return (logits.argmax(1) == labels).float().mean().item()  # HELPER-SYNC
        """)
    script = write(tmp_path, "train.py", PRELUDE + """\
        from trace_helpers_a import accuracy


        def log(loss):
            return float(loss)  # LOCAL-SYNC


        for step in range(3):
            loss = train_step()
            log(loss)
            accuracy(torch.randn(8, 3, device=device), torch.zeros(8, dtype=torch.long, device=device))
        print(loss.item())  # ONCE-SYNC
        """)
    result = trace(tmp_path, "train.py")
    assert result.outcome.kind == "completed" and result.outcome.status == 0
    assert result.total_steps == 3
    sites = by_line(result)
    (helper,) = sites[("trace_helpers_a.py", line_of(helpers, "HELPER-SYNC"))]
    (local,) = sites[("train.py", line_of(script, "LOCAL-SYNC"))]
    (once,) = sites[("train.py", line_of(script, "ONCE-SYNC"))]
    assert (helper.op, helper.count, helper.function) == ("Tensor.item", 3, "accuracy")
    assert (local.op, local.count, local.function) == ("Tensor.__float__", 3, "log")
    assert helper.every_step and local.every_step and helper.per_step
    assert once.count == 1 and once.calls == 1 and not once.per_step and not once.every_step
    assert len(result.sites) == 3, result.sites  # nothing inside torch, nothing spurious
    assert helper.path == "trace_helpers_a.py" and helper.source.startswith("return (logits")
    assert "trace_helpers_a" not in sys.modules  # the program's own modules are forgotten afterwards


def test_syncs_inside_libraries_go_to_the_calling_line_unless_include_libraries(tmp_path):
    library = write(tmp_path, "lib/site-packages/fakemetrics.py", """\
        def compute(values):
            return [v.item() for v in values]  # LIBRARY-SYNC
        """)
    script = write(tmp_path, "train.py", PRELUDE + """\
        import sys
        sys.path.insert(0, sys.argv[1])
        import fakemetrics

        for step in range(2):
            loss = train_step()
            fakemetrics.compute([loss, loss])  # CALL-SITE
        """)
    site_dir = str(library.parent)
    default = by_line(trace(tmp_path, "train.py", site_dir))
    assert [(s.op, s.count) for s in default[("train.py", line_of(script, "CALL-SITE"))]] == [("Tensor.item", 4)]
    assert not [key for key in default if key[0] == "fakemetrics.py"]
    included = by_line(trace(tmp_path, "train.py", site_dir, include_libraries=True))
    assert [(s.op, s.count) for s in included[("fakemetrics.py", line_of(library, "LIBRARY-SYNC"))]] == [
        ("Tensor.item", 4)]
    assert ("train.py", line_of(script, "CALL-SITE")) not in included
    sys.modules.pop("fakemetrics", None)


def test_dispatch_and_patch_layers_and_step_counts(tmp_path):
    script = write(tmp_path, "train.py", PRELUDE + """\
        for step in range(4):
            loss = train_step()
            keep = torch.rand(8, device=device) > 0.5
            picked = torch.randn(8, device=device)[keep]  # MASK
            if step % 2 == 0:
                torch.cuda.synchronize()  # EVERY-OTHER
        """)
    result = trace(tmp_path, "train.py")
    sites = by_line(result)
    (mask,) = sites[("train.py", line_of(script, "MASK"))]
    (sync,) = sites[("train.py", line_of(script, "EVERY-OTHER"))]
    assert (mask.layer, mask.label, mask.count, mask.every_step) == ("dispatch", "aten.index", 4, True)
    assert (sync.layer, sync.op, sync.count, sync.steps, sync.every_step) == ("patch", "torch.cuda.synchronize", 2, 2,
                                                                                False)
    assert sync.times(result.total_steps) == "2 times (in 2 of 4 optimizer steps)"
    assert mask.times(result.total_steps) == "4 times (every optimizer step)"


def test_an_event_on_a_thread_without_user_frames_goes_to_the_waiting_line(tmp_path):
    # As autograd's device threads on a GPU: the sync happens on a thread that runs only
    # library code, while the program's thread waits at the line that started it.
    script = write(tmp_path, "threads.py", PRELUDE + """\
        import threading

        for step in range(2):
            worker = threading.Thread(target=torch.cuda.synchronize)
            worker.start(); worker.join()  # WAITING
        """)
    (site,) = by_line(trace(tmp_path, "threads.py"))[("threads.py", line_of(script, "WAITING"))]
    assert (site.op, site.count) == ("torch.cuda.synchronize", 2)


# ----------------------------------------------------------------------------- running programs
def test_script_gets_its_argv_main_file_and_path_and_all_are_restored(tmp_path):
    write(tmp_path, "show.py", """\
        import io, json, os, sys
        out = {"argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0]}
        open(sys.argv[1], "w").write(json.dumps(out))
        sys.path.insert(0, "/nowhere")
        sys.stdout = io.StringIO()  # a program may replace its streams and move around
        os.chdir("/")
        """)
    argv, path, main_module = sys.argv, sys.path[:], sys.modules["__main__"]
    stdout, cwd = sys.stdout, os.getcwd()
    report = tmp_path / "out.json"
    result = trace(tmp_path, "show.py", str(report), "--flag", "x y")
    assert result.outcome.kind == "completed"
    seen = json.loads(report.read_text())
    assert seen["argv"][1:] == [str(report), "--flag", "x y"] and seen["argv"][0].endswith("show.py")
    assert seen["name"] == "__main__" and seen["file"].endswith("show.py")
    assert seen["path0"] == str(tmp_path)
    assert sys.argv is argv and sys.path == path and sys.modules["__main__"] is main_module
    assert sys.stdout is stdout and os.getcwd() == cwd


def test_module_mode_runs_like_python_dash_m(tmp_path):
    write(tmp_path, "tracepkg_b/__init__.py", "")
    helper = write(tmp_path, "tracepkg_b/steps.py", """\
        def read(loss):
            return loss.item()  # MODULE-SYNC
        """)
    write(tmp_path, "tracepkg_b/run.py", PRELUDE + """\
        import json, sys
        from tracepkg_b.steps import read

        assert __name__ == "__main__"
        for step in range(int(sys.argv[1])):
            read(train_step())
        json.dump({"argv": sys.argv, "path0": sys.path[0]}, open(sys.argv[2], "w"))
        """)
    report = tmp_path / "argv.json"
    result = trace(tmp_path, "tracepkg_b.run", "3", str(report), module=True)
    assert result.outcome.kind == "completed", result.outcome
    seen = json.loads(report.read_text())
    assert seen["argv"][0].endswith(os.path.join("tracepkg_b", "run.py")) and seen["argv"][1:] == ["3", str(report)]
    assert seen["path0"] == str(tmp_path)
    (site,) = by_line(result)[("steps.py", line_of(helper, "MODULE-SYNC"))]
    assert site.count == 3 and site.path == os.path.join("tracepkg_b", "steps.py")
    assert "tracepkg_b" not in sys.modules


def test_a_crashing_program_reports_what_ran_and_its_own_traceback(tmp_path):
    script = write(tmp_path, "crash.py", PRELUDE + """\
        def fail(step):
            raise ValueError(f"bad batch at step {step}")


        for step in range(5):
            loss = train_step()
            print(loss.item())  # BEFORE-CRASH
            if step == 2:
                fail(step)
        """)
    result = trace(tmp_path, "crash.py")
    outcome = result.outcome
    assert (outcome.kind, outcome.status) == ("crashed", 1)
    assert outcome.exception == "ValueError: bad batch at step 2"
    assert 'crash.py", line' in outcome.traceback and "in fail" in outcome.traceback
    assert "perflint" not in outcome.traceback and "runpy" not in outcome.traceback
    (site,) = by_line(result)[("crash.py", line_of(script, "BEFORE-CRASH"))]
    assert site.count == 3 and result.total_steps == 3


@pytest.mark.parametrize("call,kind,status,message", [
    ("sys.exit(0)", "completed", 0, None),
    ("sys.exit()", "completed", 0, None),
    ("sys.exit(3)", "exited", 3, None),
    ("sys.exit('disk full')", "exited", 1, "disk full"),
])
def test_sys_exit_becomes_the_programs_exit_status(tmp_path, call, kind, status, message):
    write(tmp_path, "leave.py", PRELUDE + f"""\
        import sys
        train_step().item()
        {call}
        """)
    result = trace(tmp_path, "leave.py")
    assert (result.outcome.kind, result.outcome.status, result.outcome.exit_message) == (kind, status, message)
    assert result.syncs == 1


# ----------------------------------------------------------------------------- limits
def test_steps_stops_after_n_optimizer_steps(tmp_path):
    script = write(tmp_path, "forever.py", PRELUDE + """\
        step = 0
        while True:
            loss = train_step()
            step += 1
            print(loss.item())  # AFTER-STEP
        """)
    result = trace(tmp_path, "forever.py", limits=Limits(steps=5))
    assert (result.outcome.kind, result.outcome.status, result.stop_reason) == ("stopped", None, "--steps 5")
    assert result.total_steps == 5
    (site,) = by_line(result)[("forever.py", line_of(script, "AFTER-STEP"))]
    assert site.count == 4 and site.every_step  # the 5th step's line never ran: stopped inside step()


def test_max_events_stops_at_the_nth_sync_even_when_the_program_swallows_the_stop(tmp_path):
    script = write(tmp_path, "greedy.py", PRELUDE + """\
        loss = train_step()
        while True:
            try:
                loss.item()  # GUARDED
            except BaseException:  # a catch-all (a retry loop, a logger) must not keep the program running
                print("swallowed")
                loss.item()  # NEXT
        """)
    result = trace(tmp_path, "greedy.py", limits=Limits(max_events=7))
    assert result.outcome.kind == "stopped" and result.stop_reason == "--max-events 7"
    assert result.events == 7 and result.syncs == 7
    (guarded,) = by_line(result)[("greedy.py", line_of(script, "GUARDED"))]
    assert guarded.count == 7 and ("greedy.py", line_of(script, "NEXT")) not in by_line(result)


def test_max_seconds_stops_a_program_that_never_syncs(tmp_path):
    write(tmp_path, "spin.py", """\
        import time
        while True:
            time.sleep(0.01)
        """)
    previous = signal.getsignal(signal.SIGALRM)
    result = trace(tmp_path, "spin.py", limits=Limits(max_seconds=0.3))
    assert result.outcome.kind == "stopped" and result.stop_reason == "--max-seconds 0.3"
    assert 0.3 <= result.seconds < 10
    assert signal.getsignal(signal.SIGALRM) is previous
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_without_an_alarm_the_deadline_is_checked_at_each_sync(tmp_path):
    clock = iter([0.0, 0.5, 5.0, 9.0, 99.0])
    stopper = Stopper(Limits(max_seconds=1.0), clock=lambda: next(clock))
    stopper._arm_alarm = lambda seconds: None  # as on a non-main thread
    stopper.start()
    stopper.check()  # 0.5 s
    with pytest.raises(TraceStopped):
        stopper.check()  # 5.0 s
    with pytest.raises(TraceStopped):
        stopper.after_step()  # sticky
    stopper.finish()
    stopper.check()  # after the program: never raises
    assert stopper.reason == "--max-seconds 1"


# ----------------------------------------------------------------------------- the CUDA layer
class FakeCuda:
    """Stands for torch.cuda's sync debug mode on a CPU build."""

    def __init__(self) -> None:
        self.mode = 0
        self.calls: list[object] = []

    def get_sync_debug_mode(self) -> int:
        return self.mode

    def set_sync_debug_mode(self, mode: object) -> None:
        self.calls.append(mode)
        self.mode = {"default": 0, "warn": 1, "error": 2}.get(mode, mode)  # type: ignore[arg-type]


def test_cuda_sync_debug_warnings_are_recorded_at_the_users_line(tmp_path):
    script = write(tmp_path, "gpu.py", PRELUDE + """\
        import warnings

        SYNC = "called a synchronizing CUDA operation"  # what torch emits in "warn" mode, at the op's line
        for step in range(3):
            loss = train_step()
            value = loss.item(); warnings.warn(SYNC)  # BOTH
            warnings.warn(SYNC)  # ONLY-CUDA
        warnings.warn("an unrelated warning", UserWarning)
        """)
    cuda = FakeCuda()
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        result = trace_program(Program("gpu.py", cwd=tmp_path), TraceOptions(cuda_sync_debug=True), cuda_module=cuda)
    assert cuda.calls == ["warn", 0] and cuda.mode == 0  # set, then restored
    assert [str(w.message) for w in shown] == ["an unrelated warning"]  # others pass through
    sites = by_line(result)
    (both,) = sites[("gpu.py", line_of(script, "BOTH"))]
    assert (both.op, both.count, both.cuda_syncs) == ("Tensor.item", 3, 3)
    (only,) = sites[("gpu.py", line_of(script, "ONLY-CUDA"))]
    assert (only.layer, only.label, only.count, only.every_step) == ("cuda", "a CUDA operation", 3, True)
    assert len(result.sites) == 2


@pytest.mark.cuda
def test_real_cuda_syncs_are_seen_by_the_sync_debug_mode(tmp_path):
    script = write(tmp_path, "real.py", """\
        import torch
        x = torch.randn(64, device="cuda")
        for step in range(3):
            value = x.sum().item()  # REAL
        """)
    result = trace(tmp_path, "real.py")
    assert result.mode == "cuda"
    (site,) = by_line(result)[("real.py", line_of(script, "REAL"))]
    assert site.count == 3 and site.cuda_syncs is not None and site.cuda_syncs >= 3


# ----------------------------------------------------------------------------- the command
def invoke(args: list[str], cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def test_cli_reports_syncs_and_exits_1_and_passes_the_programs_output(tmp_path):
    script = write(tmp_path, "train.py", PRELUDE + """\
        for step in range(2):
            print("loss", train_step().item())
        """)
    result = invoke(["trace", "train.py"], tmp_path)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("loss ") and lines[1].startswith("loss ")
    assert any(f"train.py:{line_of(script, 'print(')}:5:" in line and "PFL901 `Tensor.item` synced 2 times (every optimizer step)" in line
               for line in lines), result.output
    assert "Traced `python train.py`: completed, exit status 0 (2 optimizer steps" in result.output


def test_cli_json_output_stays_json_and_saves_the_trace(tmp_path):
    write(tmp_path, "train.py", PRELUDE + """\
        for step in range(2):
            print("loss", train_step().item())
        """)
    result = invoke(["trace", "--output-format", "json", "--save", "t.json", "train.py"], tmp_path)
    assert result.exit_code == 1
    (finding,) = json.loads(result.stdout)  # the program's prints went to stderr
    assert "loss " in result.stderr
    assert finding["code"] == "PFL901" and finding["name"] == "runtime-sync"
    assert finding["trace"]["count"] == 2 and finding["trace"]["every_step"] is True
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved["format"] == "perflint-trace" and saved["status"]["outcome"] == "completed"
    assert saved["total_steps"] == 2 and saved["totals"]["syncs"] == 2


def test_cli_exit_codes_for_clean_crashing_missing_and_exit_zero(tmp_path):
    write(tmp_path, "clean.py", PRELUDE + "train_step()\n")
    write(tmp_path, "crash.py", PRELUDE + "train_step().item()\nraise RuntimeError('boom')\n")
    assert invoke(["trace", "clean.py"], tmp_path).exit_code == 0
    crashed = invoke(["trace", "crash.py"], tmp_path)
    assert crashed.exit_code == 3
    assert "RuntimeError: boom" in crashed.stderr and "Traceback" in crashed.stderr
    assert "the program raised RuntimeError: boom (exit status 1" in crashed.stdout
    assert "PFL901" in crashed.stdout  # what ran before the crash is still reported
    missing = invoke(["trace", "nope.py"], tmp_path)
    assert missing.exit_code == 2 and "no such file: nope.py" in missing.stderr
    write(tmp_path, "sync.py", PRELUDE + "train_step().item()\n")
    assert invoke(["trace", "--exit-zero", "sync.py"], tmp_path).exit_code == 0


def test_cli_options_after_the_script_belong_to_the_program(tmp_path):
    write(tmp_path, "args.py", "import sys\nprint('ARGS', sys.argv[1:])\n")
    result = invoke(["trace", "-q", "args.py", "--steps", "3", "-o", "x"], tmp_path)
    assert result.exit_code == 0
    assert "ARGS ['--steps', '3', '-o', 'x']" in result.output
    assert not (tmp_path / "x").exists()


def test_noqa_hides_an_acknowledged_sync(tmp_path):
    write(tmp_path, "train.py", PRELUDE + """\
        for step in range(2):
            train_step().item()  # noqa: PFL201
            train_step().item()  # noqa: PFL901
        """)
    result = invoke(["trace", "train.py"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "Not shown: 2 sites acknowledged with `# noqa`." in result.output


def test_sarif_output_carries_the_trace_in_properties(tmp_path):
    from perflint.report import FORMATTERS

    if "sarif" not in FORMATTERS:
        pytest.skip("the SARIF formatter is not in this build")
    write(tmp_path, "train.py", PRELUDE + "for step in range(2):\n    train_step().item()\n")
    result = invoke(["trace", "--output-format", "sarif", "train.py"], tmp_path)
    (item,) = json.loads(result.stdout)["runs"][0]["results"]
    assert item["ruleId"] == "PFL901" and item["properties"]["trace"]["count"] == 2


def test_cli_module_not_found_is_a_usage_error(tmp_path):
    missing = invoke(["trace", "-m", "no_such_module_h5"], tmp_path)
    assert missing.exit_code == 2 and "no module named `no_such_module_h5`" in missing.stderr
    # without torch: tests/test_without_torch.py


def test_a_probe_that_cannot_start_is_an_error_not_a_program_crash(tmp_path):
    from perflint.harness.probe import SyncProbe

    write(tmp_path, "ok.py", "x = 1\n")
    with SyncProbe(simulate=True), pytest.raises(RuntimeError, match="already active"):
        trace(tmp_path, "ok.py")
