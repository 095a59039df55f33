# Does speculation pay under load? A 4-client load of the real pair in process through the Scheduler (as the server
# runs it, minus HTTP), the prompt path on where the CPU has one, with the scheduler's allotment ("auto") against
# every request under load forced to gamma 1 or 2 ("g1", "g2"), alternating, in one process.
#   .venv/bin/python docs/bench/allot/allot4.py [ROUNDS] [MODES, comma-separated]
import collections, statistics, sys, threading, time
import anyio, torch
from specdecode.bench.clients import bench_prompts
from specdecode.engine import Generation
from specdecode.load import add_prompt_paths, default_draft, load_draft, load_target
from specdecode.sampling import GREEDY
from specdecode.server import scheduler as S
from specdecode.server import threads as TH

torch.set_num_threads(2)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
MODES = sys.argv[2].split(",") if len(sys.argv) > 2 else ["auto", "g1"]


def loadall():
    t = load_target("qwen2.5-coder-1.5b")
    d = load_draft(default_draft(t), t)
    return t, d


t, d = TH.on_engine(loadall)
print("prompt paths for", TH.on_engine(add_prompt_paths, t, d, True), flush=True)
prompts = bench_prompts("qwen2.5-coder-1.5b", 2)
log = []
orig_pass, orig_allot = S.Scheduler._run_pass, S.Scheduler.allot
FORCED = None


def run_pass(self):
    key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
    model, items = self._queues[key if key is not None else id(self.target)]
    desc = [(it.lease.id, it.tokens.numel(), it.prompt) for it in items]
    s = time.perf_counter()
    orig_pass(self)
    log.append(("T" if model is self.target else "D", time.perf_counter() - s, desc))


def allot(self, max_gamma):
    if FORCED is None:
        return orig_allot(self, max_gamma)
    return {lease.id: FORCED for lease in self.leased if lease.controller is not None}


S.Scheduler._run_pass, S.Scheduler.allot = run_pass, allot


def load(mode):
    global FORCED
    FORCED = None if mode == "auto" else int(mode[1:])
    sched = S.Scheduler(t.model, d, sequences=4)
    reqs, outputs = [], {}
    log.clear()

    def client(ci):
        TH.serial()
        for p in prompts[ci::4]:
            ids = t.tokenizer.encode_chat([{"role": "user", "content": p.prompt}])
            lease = sched.lease()
            anyio.run(sched.acquire, lease, None, None)
            lease.target.clear(); lease.draft.clear()
            g = Generation(lease.target, lease.draft, ids, max_new_tokens=64, gamma=lease.allotted(),
                           sampling=GREEDY, seed=1234, stop_token_ids=t.tokenizer.stop_token_ids,
                           tokenizer=t.tokenizer)
            steps = iter(g)
            while True:
                with sched.inside():
                    r = next(steps, None)
                if r is None:
                    break
            sched.release(lease)
            outputs[p.id] = g.new_tokens
            reqs.append(len(g.new_tokens))

    th = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    w0 = time.perf_counter()
    for x in th: x.start()
    for x in th: x.join()
    wall = time.perf_counter() - w0
    tok = sum(reqs)
    tp = [x for x in log if x[0] == "T"]; dp = [x for x in log if x[0] == "D"]
    pre = [x for x in tp if any(p for _, _, p in x[2])]
    steady = collections.defaultdict(list)  # (sequences, rows) -> seconds, target passes without prompt rows
    for _, s, desc in tp:
        if not any(p for _, _, p in desc):
            steady[(len(desc), sum(k for _, k, _ in desc))].append(s)
    common = sorted(steady.items(), key=lambda kv: -len(kv[1]))[:6]
    print(f"{mode:4s}: {tok} tokens in {wall:.1f} s = {tok / wall:.2f} tok/s; target passes {len(tp)} "
          f"{sum(x[1] for x in tp):.1f} s ({tok / len(tp):.2f} tokens a pass), of them with prompt rows {len(pre)} "
          f"{sum(x[1] for x in pre):.1f} s; draft passes {len(dp)} {sum(x[1] for x in dp):.1f} s; "
          "target passes (sequences, rows): " + ", ".join(
              f"{k}: {len(v)} x {statistics.median(v) * 1e3:.0f} ms" for k, v in common), flush=True)
    return outputs


results = {}
for r in range(ROUNDS):
    for mode in MODES if r % 2 == 0 else MODES[::-1]:
        out = load(mode)
        results.setdefault(mode, out)
for mode in MODES[1:]:
    same = sum(results[mode][k] == results[MODES[0]][k] for k in results[MODES[0]])
    print(f"greedy answers the same in {mode} as in {MODES[0]}: {same} of {len(results[MODES[0]])}")
