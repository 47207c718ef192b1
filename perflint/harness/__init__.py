"""`perflint bench` and the run-time tools. torch is imported lazily: the linter never needs it.

Modules:
- `probe`: `SyncProbe`, which records the host-device syncs that code performs while it
  runs, on a GPU or on a CPU-only build (where it simulates the accelerator). It is the base
  for `perflint trace`:

      from perflint.harness.probe import SyncProbe, SyncEvent, count_syncs
      with SyncProbe(accelerator=device) as probe:      # simulate=None: auto (no CUDA -> simulate)
          train_step()
      probe.events      # [SyncEvent(layer, op, reason, filename, lineno, function, source, count)]
      probe.count, probe.by_op(), probe.by_location(), probe.reset(), probe.uncounted(), probe.mark(t)

  `FUNCTION_RULES` / `DISPATCH_RULES` are the tables of what syncs (extend them there).
- `snippets`: how a rule's benchmark pair is wrapped as hot code (for the linter) and compiled.
- `verify`: bad and good forms compute the same result and the good form syncs less (no timing).
- `timing`, `cuda`: A/B step timing; the CUDA sync proof, profiler counts and GPU-work sweep.
- `runner`, `report`, `plot`: a whole bench run, its JSON, tables, summaries and chart.
- `endtoend`: a training script before and after `perflint fix --unsafe-fixes`.
- `command`: the `perflint bench` click command.

`snippets`, `report`, `plot` and `command` import without torch.
"""
