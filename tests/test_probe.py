"""The sync probe against the table in sync-catalog.md §3, on the CPU build (simulate mode).

Each case runs `setup` uncounted and `code` counted, with `device` standing for the
accelerator. "SYNC" cases must record at least one sync (and the expected op where the
catalog names one); "no" cases must record none.
"""

from __future__ import annotations

import linecache
import textwrap

import pytest

torch = pytest.importorskip("torch")

from perflint.harness.probe import DISPATCH, FUNCTION, PATCH, SyncProbe, count_syncs  # noqa: E402

SETUP = """
x = torch.randn(8, device=device)
t0 = torch.tensor(0.5, device=device)
t1 = torch.tensor(1.5, device=device)
m = x > 0
A = torch.randn(3, 3, device=device) @ torch.randn(3, 3, device=device).T + 3 * torch.eye(3, device=device)
idx = torch.tensor([0, 1], device=device)
i0 = torch.tensor(1, device=device)
reps = torch.tensor([1, 2], device=device)
labels = torch.tensor([0, 2], device=device)
"""

# (id, code, expected count (None: >= 1), expected (layer, op) of the first event or None)
SYNCS = [
    ("item", "x.sum().item()", 1, (FUNCTION, "Tensor.item")),
    ("float()/int()", "float(t0); int(t1)", 2, (FUNCTION, "Tensor.__float__")),
    ("if tensor:", "if t0 > 0:\n    pass", 1, (FUNCTION, "Tensor.__bool__")),
    ("while tensor:", "n = 0\nwhile (t0 + n) < 1:\n    n += 1", 2, (FUNCTION, "Tensor.__bool__")),
    ("assert tensor", "assert t0 > 0", 1, (FUNCTION, "Tensor.__bool__")),
    ("str(t)/print", "str(x)", 1, (FUNCTION, "Tensor.__repr__")),
    ("print", "print(x)", 1, (FUNCTION, "Tensor.__repr__")),
    ("f'{t0d}'", "s = f'{t0:.3f}'", 1, (FUNCTION, "Tensor.__format__")),
    ("f'{t}'", "s = f'{x}'", 1, (FUNCTION, "Tensor.__format__")),
    ("tolist", "x.tolist()", 1, (FUNCTION, "Tensor.tolist")),
    (".cpu().numpy()", "x.cpu().numpy()", 1, (FUNCTION, "Tensor.cpu")),
    (".to('cpu')", "x.to('cpu')", 1, (FUNCTION, "Tensor.to")),
    (".to(torch.device('cpu'))", "x.to(torch.device('cpu'))", 1, (FUNCTION, "Tensor.to")),
    ("rand().to(dev)", "torch.rand(4).to(device)", 1, (FUNCTION, "Tensor.to")),
    ("rand().cuda()", "torch.rand(4).cuda()", 1, (FUNCTION, "Tensor.cuda")),
    ("tensor(data,dev)", "torch.tensor([1.0, 2.0], device=device)", 1, (FUNCTION, "torch.tensor")),
    ("tensor([t,t])", "torch.tensor([t0, t1])", 2, (FUNCTION, "torch.tensor")),
    ("nonzero", "torch.nonzero(x)", 1, (DISPATCH, "aten.nonzero.default")),
    ("where(cond)", "torch.where(m)", 1, (DISPATCH, "aten.nonzero.default")),
    ("argwhere", "torch.argwhere(x)", 1, (DISPATCH, "aten.nonzero.default")),
    ("len(nonzero)", "len(x.nonzero())", 1, (DISPATCH, "aten.nonzero.default")),
    ("x[mask]", "x[m]", 1, (DISPATCH, "aten.index.Tensor")),
    ("x[mask]=tensor0d", "x[m] = t0", 1, (DISPATCH, "aten.index_put_.default")),
    ("x[idx]=scalar", "x[idx] = 0.0", 1, (DISPATCH, "aten.index_put_.default")),
    ("x[t0] (0-dim idx)", "x[i0]", 1, (DISPATCH, "aten._local_scalar_dense.default")),
    ("masked_select", "torch.masked_select(x, m)", 1, (DISPATCH, "aten.masked_select.default")),
    ("unique", "torch.unique(x)", 1, (DISPATCH, "aten._unique2.default")),
    ("Tensor.unique(dim)", "x.view(2, 4).unique(dim=0)", 1, (DISPATCH, "aten.unique_dim.default")),
    ("unique_consecutive", "torch.unique_consecutive(x)", 1, (DISPATCH, "aten.unique_consecutive.default")),
    ("repeat_interleave(T)", "torch.repeat_interleave(reps)", 1,
     (DISPATCH, "aten.repeat_interleave.Tensor")),
    ("x.repeat_interleave(T)", "x[:2].repeat_interleave(reps)", 1,
     (DISPATCH, "aten.repeat_interleave.Tensor")),
    ("bincount", "torch.bincount(reps)", 1, (DISPATCH, "aten.bincount.default")),
    ("histc default", "torch.histc(x)", 1, (DISPATCH, "aten.histc.default")),
    ("equal", "torch.equal(x, x)", 1, (DISPATCH, "aten.equal.default")),
    ("allclose", "torch.allclose(x, x)", 1, (DISPATCH, "aten.allclose.default")),
    ("one_hot()", "torch.nn.functional.one_hot(labels)", 1,
     (FUNCTION, "torch.nn.functional.one_hot")),
    ("linalg.inv", "torch.linalg.inv(A)", 1, (DISPATCH, "aten._linalg_check_errors.default")),
    ("linalg.eigh", "torch.linalg.eigh(A)", 1, (DISPATCH, "aten._linalg_eigh.default")),
    ("normal(std=T)", "torch.normal(x, x.abs())", 1, (DISPATCH, "aten.normal.Tensor_Tensor")),
    ("normal(0., std=T)", "torch.normal(0.0, x.abs())", 1, (DISPATCH, "aten.normal.float_Tensor")),
    ("masked_fill(T val)", "x.masked_fill(m, t0)", 1, (DISPATCH, "aten.masked_fill.Tensor")),
    ("`v in t`", "0.5 in x", 1, (DISPATCH, "aten._local_scalar_dense.default")),
    ("max(t0,t1)", "max(t0, t1)", 1, (FUNCTION, "Tensor.__bool__")),
    ("clip_grad(err=T)", None, 1, None),
    ("Normal(validate)", "torch.distributions.Normal(x, x.abs() + 1, validate_args=True)", None, None),
    ("x[host idx]", "x[torch.arange(2)]", 1, (DISPATCH, "aten.index.Tensor")),
    ("x[host mask]", "x[torch.ones(8, dtype=torch.bool)]", 1, (DISPATCH, "aten.index.Tensor")),
    ("x[host idx]=dev", "x[torch.arange(2)] = x[:2] * 2", 1, (DISPATCH, "aten.index_put_.default")),
    ("x[dev idx]=host 0-dim", "x[idx] = torch.tensor(1.0)", 1, (DISPATCH, "aten.index_put_.default")),
    ("x[host mask]=host 0-dim", "x[torch.ones(8, dtype=torch.bool)] = torch.tensor(1.0)", 1,
     (DISPATCH, "aten.index_put_.default")),
    ("copy_ H2D", "x.copy_(torch.randn(8))", 1, (DISPATCH, "aten.copy_.default")),
    ("copy_ D2H", "torch.empty(8).copy_(x)", 1, (DISPATCH, "aten.copy_.default")),
    ("cuda.synchronize", "torch.cuda.synchronize()", 1, (PATCH, "torch.cuda.synchronize")),
    ("cuda.empty_cache", "torch.cuda.empty_cache()", 1, (PATCH, "torch.cuda.empty_cache")),
    ("Stream.synchronize", "torch.cuda.Stream.synchronize(object())", 1, (PATCH, "torch.cuda.Stream.synchronize")),
    ("Event.synchronize", "torch.cuda.Event.synchronize(object())", 1, (PATCH, "torch.cuda.Event.synchronize")),
]

NO_SYNCS = [
    (".to(cpu,nb=True)", "x.to('cpu', non_blocking=True)"),
    ("rand().to(dev,nb)", "torch.rand(4).to(device, non_blocking=True)"),
    ("x[mask]=scalar", "x[m] = 0.0"),
    ("x[mask]=host 0-dim", "x[m] = torch.tensor(1.0)"),
    ("rep_interleave(os=)", "torch.repeat_interleave(reps, output_size=3)"),
    ("rep_interleave(int)", "x.repeat_interleave(2)"),
    ("histc(min,max)", "torch.histc(x, bins=4, min=-3, max=3)"),
    ("multinomial rep", "torch.multinomial(x.abs() + 0.1, 4, replacement=True)"),
    # measured on an H100 with torch 2.11: the validity checks are device asserts (no host read)
    ("multinomial norep", "torch.multinomial(x.abs() + 0.1, 2)"),
    ("multinomial 1 sample", "torch.multinomial(x.abs() + 0.1, 1)"),
    ("one_hot(K)", "torch.nn.functional.one_hot(labels, 3)"),
    ("len(t)/data_ptr", "len(x); x.data_ptr(); x.shape; x.numel()"),
    ("where(c,a,b)", "torch.where(m, x, 0.0)"),
    ("masked_fill(scalar)", "x.masked_fill(m, 0.0)"),
    ("nonzero_static", "torch.nonzero_static(x, size=3)"),
    ("count_nonzero", "torch.count_nonzero(m)"),
    ("_assert_async", "torch._assert_async(t0 > 0)"),
    ("sort-diff #unique", "s = x.sort().values; n = (s[1:] != s[:-1]).sum() + 1"),
    ("scatter_add count", "torch.zeros(3, device=device).scatter_add_(0, labels, torch.ones(2, device=device))"),
    ("CE ignore_index", "torch.nn.functional.cross_entropy(torch.randn(2, 3, device=device), torch.where(labels > 0, labels, -100), ignore_index=-100)"),
    ("linalg.inv_ex", "torch.linalg.inv_ex(A)"),
    ("clip_grad default", None),
    ("Normal(no valid.)", "torch.distributions.Normal(x, x.abs() + 1, validate_args=False)"),
    ("to(dev) of a device tensor", "x.to(device)"),
    ("host-only work", "h = torch.randn(4); h.sum().item(); h.tolist(); print(h); h[h > 0]"),
    ("copy_ nb", "x.copy_(torch.randn(8), non_blocking=True)"),
    ("device getter", "torch.zeros(2, device=x.device).nonzero_static(size=1)"),
    ("x[dev idx]", "x[torch.arange(2, device=x.device)]"),
    ("host[host idx]", "h = torch.randn(4); h[torch.arange(2)]; h[torch.arange(2)] = 1.0"),
]

CLIP_SETUP = """
p = torch.nn.Parameter(torch.randn(4, device=device))
p.grad = torch.randn(4, device=device)
"""


def _run(code: str, setup: str = SETUP) -> SyncProbe:
    device = torch.device("cpu")
    namespace = {"torch": torch, "device": device}
    name = "<probe-case>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    with SyncProbe(simulate=True, accelerator=device) as probe:
        with probe.uncounted():
            exec(textwrap.dedent(setup), namespace)
        exec(compile(code, name, "exec"), namespace)
    return probe


def _clip(error_if_nonfinite: bool) -> str:
    return f"torch.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite={error_if_nonfinite})"


@pytest.mark.parametrize("case,code,count,first", SYNCS, ids=[c[0] for c in SYNCS])
def test_catalog_syncs_are_seen(case, code, count, first):
    setup = SETUP
    if case == "clip_grad(err=T)":
        code, setup = _clip(True), SETUP + CLIP_SETUP
    probe = _run(code, setup)
    assert probe.count >= 1, f"{case}: no sync recorded"
    if count is not None:
        assert probe.count == count, [e.to_json() for e in probe.events]
    if first is not None:
        event = probe.events[0]
        assert (event.layer, event.op) == first, event
    for event in probe.events:
        assert event.filename == "<probe-case>" and event.lineno >= 1, event


@pytest.mark.parametrize("case,code", NO_SYNCS, ids=[c[0] for c in NO_SYNCS])
def test_catalog_non_syncs_are_silent(case, code):
    setup = SETUP
    if case == "clip_grad default":
        code, setup = _clip(False), SETUP + CLIP_SETUP
    probe = _run(code, setup)
    assert probe.events == [], [e.to_json() for e in probe.events]


def test_events_point_at_the_user_line_and_source():
    code = "y = x * 2\nz = y.sum()\nvalue = z.item()\n"
    probe = _run(code)
    (event,) = probe.events
    assert event.lineno == 3 and event.source == "value = z.item()"
    assert event.location == "<probe-case>:3"
    assert event.to_json()["line"] == 3


def test_logging_a_tensor_is_attributed_to_the_caller_not_the_logging_module():
    code = "import logging\nlogging.getLogger('probe-test').warning('%s', x)\n"
    probe = _run(code)
    assert probe.count >= 1  # once per handler that formats the record
    assert {(e.filename, e.lineno, e.op) for e in probe.events} == {("<probe-case>", 2, "Tensor.__repr__")}


def test_real_cpu_tensors_never_sync_without_simulation():
    with SyncProbe(simulate=False) as probe:
        x = torch.randn(8)
        x.sum().item()
        x[x > 0]
        torch.unique(x)
        print(x)
        torch.cuda.synchronize() if False else None
    assert probe.events == []


def test_uncounted_and_reset():
    device = torch.device("cpu")
    with SyncProbe(simulate=True, accelerator=device) as probe:
        x = torch.randn(4, device=device)
        with probe.uncounted():
            x.sum().item()
        assert probe.count == 0
        x.sum().item()
        assert probe.count == 1
        probe.reset()
        assert probe.events == []
        # placement survives reset: x is still on the (simulated) accelerator
        x.tolist()
        assert probe.count == 1
    assert probe.by_op() == {"Tensor.tolist": 1}


def test_simulated_host_copies_do_not_alias_and_stay_on_the_host():
    device = torch.device("cpu")
    with SyncProbe(simulate=True, accelerator=device) as probe:
        x = torch.randn(4, device=device)
        host = x.cpu()
        assert host is not x
        assert probe.on_accelerator(x) and not probe.on_accelerator(host)
        host.sum().item()  # reading a host tensor is free
        back = host.to(device)
        assert probe.on_accelerator(back) and back is not host
    assert [e.op for e in probe.events] == ["Tensor.cpu", "Tensor.to"]


def test_loader_batches_are_on_the_host_and_parameters_on_the_accelerator():
    device = torch.device("cpu")
    data = torch.utils.data.TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,)))
    with SyncProbe(simulate=True, accelerator=device) as probe:
        with probe.uncounted():
            model = torch.nn.Linear(3, 2).to(device)
        for xb, yb in torch.utils.data.DataLoader(data, batch_size=4):
            xb, yb = xb.to(device), yb.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
    # two blocking copies of xb, nothing else
    assert [e.op for e in probe.events] == ["Tensor.to", "Tensor.to"]


def test_count_syncs_and_single_active_probe():
    x = torch.randn(3)

    def step():
        return x.sum().item()

    value, events = count_syncs(step, simulate=True)
    assert value == pytest.approx(float(x.sum()))
    # x was created outside the probe: an untracked, non-parameter tensor is on the host
    assert events == []
    with SyncProbe(simulate=True):
        with pytest.raises(RuntimeError, match="already active"):
            SyncProbe(simulate=True).__enter__()


def test_patches_are_removed_on_exit():
    original = torch.cuda.synchronize
    with SyncProbe(simulate=True):
        assert torch.cuda.synchronize is not original
    assert torch.cuda.synchronize is original


@pytest.mark.skipif(torch.cuda.is_available(), reason="stand-ins exist only on builds without CUDA")
def test_cuda_streams_events_and_pinning_stand_in_on_a_cpu_build():
    code = textwrap.dedent("""
        host = x.to("cpu", non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
        torch.cuda.current_stream().synchronize()
        pinned = torch.randn(4).pin_memory()
        with torch.cuda.stream(torch.cuda.Stream()):
            y = pinned.to(device, non_blocking=True)
        z = y.sum().item()
    """)
    probe = _run(code)
    assert [e.op for e in probe.events] == [
        "torch.cuda.Event.synchronize", "torch.cuda.Stream.synchronize", "Tensor.item"]
    assert torch.cuda.Event is not None and not isinstance(torch.cuda.Event, type(lambda: 0))


def test_stand_ins_are_removed_on_exit():
    event, stream = torch.cuda.Event, torch.cuda.Stream
    with SyncProbe(simulate=True):
        pass
    assert torch.cuda.Event is event and torch.cuda.Stream is stream


# The rewrite check of sync-catalog.md §3, through the same path `perflint bench` uses.
REWRITES = [
    ("x[m] = t0d -> where", "x = torch.randn(size, device=device)\nt = x.max()",
     "x[x > 0] = t\nresult = x", "x = torch.where(x > 0, t.to(x.dtype), x)\nresult = x", 1),
    ("len(nonzero) -> sum", "x = torch.randn(size, device=device)",
     "result = len(torch.nonzero(x > 0))", "result = (x > 0).sum()", 1),
    ("unique().numel()", "x = torch.randint(0, 5, (size,), device=device)",
     "result = torch.unique(x).numel()",
     "s = x.flatten().sort().values\nresult = (s[1:] != s[:-1]).sum() + 1", 1),
    ("repeat_interleave + output_size", "r = torch.randint(0, 3, (size,), device=device)\nn = int(r.sum())",
     "result = torch.repeat_interleave(r)", "result = torch.repeat_interleave(r, output_size=n)", 1),
    ("CE[mask] -> ignore_index",
     "logits = torch.randn(size, 4, device=device)\ny = torch.randint(-1, 4, (size,), device=device)",
     "k = y >= 0\nresult = torch.nn.functional.cross_entropy(logits[k], y[k])",
     "result = torch.nn.functional.cross_entropy(logits, torch.where(y >= 0, y, -100), ignore_index=-100)", 2),
    ("assert -> _assert_async", "x = torch.rand(size, device=device)",
     "assert (x >= 0).all()\nresult = x", "torch._assert_async((x >= 0).all())\nresult = x", 1),
    ("linalg.inv -> inv_ex", "a = torch.randn(4, 4, device=device) + 4 * torch.eye(4, device=device)",
     "result = torch.linalg.inv(a)", "result = torch.linalg.inv_ex(a).inverse", 1),
    ("bincount -> scatter_add", "x = torch.randint(0, 6, (size,), device=device)",
     "result = torch.bincount(x, minlength=6)",
     "result = torch.zeros(6, dtype=torch.long, device=device).scatter_add_(0, x, torch.ones_like(x))", 1),
    ("tensor([t, t]) -> stack", "a = torch.randn((), device=device)\nb = torch.randn((), device=device)",
     "result = torch.tensor([a, b])", "result = torch.stack([a, b])", 2),
    (".cpu() per step -> stay on device", "x = torch.randn(size, device=device)",
     "result = x.mean().cpu()", "result = x.mean()", 1),
    ("rand().to(device) -> device=", "g = None",
     "torch.manual_seed(0)\nresult = torch.zeros(size).to(device)", "result = torch.zeros(size, device=device)", 1),
]


@pytest.mark.parametrize("case,setup,bad,good,bad_syncs", REWRITES, ids=[r[0] for r in REWRITES])
def test_catalog_rewrites_sync_less_and_compute_the_same(case, setup, bad, good, bad_syncs):
    from perflint.harness.verify import verify_rule
    from perflint.rule import Benchmark

    class Pair:
        code, name = "PFL999", "catalog-rewrite"
        benchmark = Benchmark(setup=setup, bad=bad, good=good)

    report = verify_rule(Pair, "cpu", seeds=(0, 1), size=32, use_linter=False)  # type: ignore[arg-type]
    assert report.results == "equal", report.detail
    assert report.syncs_bad == [bad_syncs, bad_syncs] and report.syncs_good == [0, 0], (
        [e.op for e in report.bad_events], [e.op for e in report.good_events])
