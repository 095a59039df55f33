"""Run `specdecode serve` with the scheduler's passes and allotments logged to $PROBE_LOG (JSON lines)."""
import json, os, sys, time
import specdecode.server.scheduler as s

LOG = open(os.environ["PROBE_LOG"], "a", buffering=1)
orig_run, orig_allot = s.Scheduler._run_pass, s.Scheduler.allot

def run_pass(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    rows = [int(i.tokens.numel()) for i in items]
    kind = "target" if model is self.target else "draft"
    start = time.perf_counter()
    orig_run(self)
    LOG.write(json.dumps({"t": time.time(), "kind": kind, "rows": rows, "ms": (time.perf_counter() - start) * 1e3}) + "\n")

def allot(self, max_gamma):
    out = orig_allot(self, max_gamma)
    line = {"t": time.time(), "kind": "allot", "gamma": out, "leased": len(self.leased)}
    if self.target_times.measured:
        line["T"] = [round(self.target_times(k) * 1e3, 1) for k in (1, 2, 4, 8, 16)]
    if self.draft_times.measured:
        line["Td"] = [round(self.draft_times(k) * 1e3, 1) for k in (1, 2, 4)]
    line["alpha"] = {l.id: round(l.controller.acceptance(l.controller.copied), 3) for l in self.leased if l.controller}
    line["copied"] = [l.id for l in self.leased if l.controller and l.controller.copied]
    LOG.write(json.dumps(line) + "\n")
    return out

s.Scheduler._run_pass, s.Scheduler.allot = run_pass, allot
from specdecode.cli import main
sys.exit(main(sys.argv[1:]))
