"""`perflint bench` and the run-time tools: everything here imports torch lazily.

Modules:
- `probe`: `SyncProbe`, a counter of host-device syncs that works on a CPU build (the base
  for `perflint trace`).
- `snippets`: how a rule's benchmark pair is wrapped into a module (for the linter) and run.
- `cpu_check`: bad and good compute the same result, and good syncs less (no timing).
- `timing`, `cuda`: A/B step timing, the CUDA sync proof, the GPU-work sweep.
- `runner`, `report`, `plot`: a whole bench run, its JSON, tables and chart.
- `endtoend`: the segmentation example, before and after `perflint fix --unsafe-fixes`.

Only `snippets`, `report` and `command` may be imported without torch installed.
"""
