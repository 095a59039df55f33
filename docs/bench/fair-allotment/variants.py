"""The allotment of this tree against another commit's and plain batching, at 4 requests and at 2, loads alternating
(docs/bench/fair-allotment/README.md): the real pair with the server's default draft (lookup+qwen2.5-coder-0.5b), the
12 prompts of `bench --clients`, 64 greedy tokens each, seed 1234, through the Scheduler as the server runs it (no
HTTP). From the repository root:

    .venv/bin/python docs/bench/fair-allotment/variants.py [REPS] [OTHER,...] [CLIENTS,...]

OTHER: a commit (its scheduler.py's allotment, run on this tree's scheduler) or a patch against this tree's
scheduler.py (applied to a copy); HEAD unless given.

Prints each load's tokens/s and per-token p95 (weighted by tokens), then the medians and the answers' agreement."""
import importlib.util, runpy, statistics, subprocess, sys, tempfile
from pathlib import Path
from collections import defaultdict
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
OTHERS = sys.argv[2].split(",") if len(sys.argv) > 2 else ["HEAD"]
CLIENTS = [int(c) for c in sys.argv[3].split(",")] if len(sys.argv) > 3 else [4, 2]
sys.argv = [sys.argv[0], "1", "lookup+qwen2.5-coder-0.5b"]
import specdecode.server.scheduler as sch


def allot_of(other: str):
    """The allotment of a commit's scheduler.py, or of this tree's with a patch applied."""
    here = Path(sch.__file__)
    if other.endswith(".patch"):
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / "specdecode/server/scheduler.py"
            copy.parent.mkdir(parents=True)
            copy.write_text(here.read_text())
            subprocess.run(["patch", "-s", "-p1", "-i", str(Path(other).resolve())], cwd=folder, check=True)
            source = copy.read_text()
    else:
        source = subprocess.run(["git", "show", f"{other}:specdecode/server/scheduler.py"], check=True,
                                capture_output=True, text=True).stdout
    source = source.replace("from ..", "from specdecode.").replace("from .threads", "from specdecode.server.threads")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(source)
    name = f"other_scheduler_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, file.name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.Scheduler.allot


variants = {"this tree": sch.Scheduler.allot} | {Path(o).stem: allot_of(o) for o in OTHERS} | {
    "plain": lambda self, max_gamma: {lease.id: 0 for lease in self.leased if lease.controller is not None}}

setup = runpy.run_path("docs/bench/hybrid-allotment/ab_draft.py", run_name="ab_draft")
d = "lookup+qwen2.5-coder-0.5b"
setup["one"](d, setup["prompts"][0], []); setup["one"](d, setup["prompts"][5], [])
results, texts = defaultdict(list), {}
for rep in range(REPS):
    order = [(name, c) for c in CLIENTS for name in variants]
    for name, clients in (order if rep % 2 == 0 else order[::-1]):
        sch.Scheduler.allot = variants[name]
        rate, p95, answers, per_round = setup["load"](d, clients)
        texts.setdefault((name, clients), answers)
        results[(name, clients)].append((rate, p95))
        print(f"{name:10s} {clients} clients {rate:5.1f} tok/s, p95 {p95 * 1e3:5.1f} ms, tokens per emitting round "
              f"{per_round:.2f}", flush=True)
sch.Scheduler.allot = variants["this tree"]
rate1, p95_1, answers1, _ = setup["load"](d, 1)
print(f"1 client {rate1:5.1f} tok/s, p95 {p95_1 * 1e3:5.1f} ms")
for (name, clients), rows in results.items():
    rate, p95 = statistics.median(r for r, _ in rows), statistics.median(p for _, p in rows)
    print(f"{name:10s} {clients} clients: median {rate:5.1f} tok/s ({rate / rate1:.2f}x 1 client), p95 "
          f"{p95 * 1e3:5.1f} ms ({p95 / p95_1:.2f}x); answers as 1 client's: {texts[(name, clients)] == answers1}")
