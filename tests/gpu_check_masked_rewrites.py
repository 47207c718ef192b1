"""GPU check of the masked-reduction rewrites (PFL211/PFL213/PFL214): run on a CUDA machine,

    python tests/gpu_check_masked_rewrites.py

For each original form and its rewrite: does it sync (`torch.cuda.set_sync_debug_mode("error")`),
and are the results equal / close. Not collected by pytest (it needs a GPU). The numbers quoted
in PFL214's Fix safety come from one run on an H100 (torch 2.11.0+cu130): every original
synced, no rewrite did; float sums close but not equal; integer sums, counts, mean, max, min
equal; the accuracy mean differed in the last bit for 98 of 403 sizes.
"""

import torch

dev = torch.device("cuda")
print(torch.__version__, torch.cuda.get_device_name())
torch.manual_seed(0)
x = torch.randn(1000, 37, device=dev)
y = torch.randn(1000, 37, device=dev)
xi = torch.randint(-50, 50, (1000, 37), device=dev)
keep1 = torch.rand(1000, device=dev) > 0.5
m = y > 0
pred = torch.randint(0, 5, (4096,), device=dev)
tgt = torch.randint(-1, 5, (4096,), device=dev)
valid = tgt >= 0


def syncs(fn):
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
        return False
    except RuntimeError as e:
        return "synchroniz" in str(e)
    finally:
        torch.cuda.set_sync_debug_mode(0)


def check(name, bad, good):
    b, g = bad(), good()
    if isinstance(b, torch.Tensor) and b.dim() == 0:
        bv, gv = b.item(), g.item()
    else:
        bv = gv = None
    same = torch.equal(b, g)
    close = torch.allclose(b.double(), g.double(), rtol=1e-5, atol=1e-5, equal_nan=True)
    print(f"{name:28s} bad_syncs={syncs(bad)!s:5} good_syncs={syncs(good)!s:5} equal={same!s:5} close={close!s:5} {bv} {gv}")


W = lambda k, t: k.reshape(k.shape + (1,) * (t.dim() - k.dim()))
check("sum float", lambda: x[m].sum(), lambda: torch.where(m, x, 0).sum())
check("sum float leading mask", lambda: x[keep1].sum(), lambda: torch.where(W(keep1, x), x, 0).sum())
check("sum int", lambda: xi[m].sum(), lambda: torch.where(m, xi, 0).sum())
check("sum int leading", lambda: xi[keep1].sum(), lambda: torch.where(W(keep1, xi), xi, 0).sum())
check("mean float", lambda: x[x > 0].mean(), lambda: torch.where(x > 0, x, 0).sum() / torch.count_nonzero(x > 0))
check("max float", lambda: x[m].max(), lambda: torch.where(m, x, float("-inf")).max())
check("min float", lambda: x[m].min(), lambda: torch.where(m, x, float("inf")).min())
check("match count", lambda: (pred[valid] == tgt[valid]).sum(), lambda: ((pred == tgt) & valid).sum())
check("count_nonzero(x[m]>0)", lambda: torch.count_nonzero(tgt[valid] > 0), lambda: torch.count_nonzero((tgt > 0) & valid))
check("len -> count_nonzero", lambda: torch.tensor(len(tgt[valid]), device=dev), lambda: torch.count_nonzero(valid))
check("masked_select sum", lambda: torch.masked_select(x, m).sum(), lambda: torch.where(m, x, 0).sum())
check("accuracy mean", lambda: (pred[valid] == tgt[valid]).float().mean(),
      lambda: ((pred == tgt) & valid).sum().float() / torch.count_nonzero(valid))


def fill_bad():
    t = x.clone(); t[torch.nonzero(t < 0, as_tuple=True)] = 0.0; return t


def fill_good():
    t = x.clone(); t.masked_fill_(t < 0, 0.0); return t


check("nonzero write -> masked_fill_", fill_bad, fill_good)
diff = 0
g = torch.Generator(device=dev).manual_seed(1)
for n in list(range(1, 400)) + [1000, 4097, 65537, 1000003]:
    p = torch.randint(0, 3, (n,), device=dev, generator=g)
    t = torch.randint(-1, 3, (n,), device=dev, generator=g)
    v = t >= 0
    a = (p[v] == t[v]).float().mean()
    b = ((p == t) & v).sum().float() / torch.count_nonzero(v)
    if not (torch.equal(a, b) or (a.isnan() and b.isnan())):
        diff += 1
print("accuracy mean: sizes where CUDA differs bitwise:", diff, "of", 403)
