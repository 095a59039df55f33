"""Many requests at once (continuous batching): each pass of a model carries the rows of every request waiting on it.

A request generates in a worker thread, round by round, on a `Lease`: a sequence of the target with a KV cache of
its own (`CausalLM.sequence`) and a draft forked for it (`Draft.fork`), on sequences of the draft's model likewise.
Their `extend` calls do not run at once: they queue, and when every request holding a lease is waiting on a pass
(one between two rounds, streaming its last, is waited for up to `grace`), the scheduler runs one: the draft
model's queue first (proposals come before verification), then the target's, all of a queue's sequences in one
`extend_batch`, on the engine thread (`threads.on_engine`: one thread computes in parallel). So one target pass
verifies every request's drafts. On the native engine each row is bitwise what
the request's own pass would give it, so no output depends on who else is served.

Requests join and leave between passes: a lease is handed out in arrival order (FIFO) when one of the `sequences`
is free, and given back when its request ends, is cut off or its client goes away. Of the free sequences it gets
the one whose cells hold the longest start of its prompt, so a chat's next turn finds its earlier turns' cells
(`CausalLM.cached`) however many other users came between; else the one given back last (requests one at a time
keep to one sequence).

Rows go where expected tokens are highest (`allot`: its pricing, for requests whose gamma is "auto" and unseeded; once
between two target passes, for all of them: `Scheduler.allotment`), on costs measured here: T(rows) of the target's
batched passes and T_d(rows) of the draft's (lines: `adaptive.PassTimes`; until the draft's are, as a lone request
measured them), the median gap before a pass of each model (`Scheduler.overhead`), and a draft's catch-up, T_c(1 +
behind) - T_c(1) (T_c measured on the draft passes that catch up, whose rows cost more than a step's: a prompt's go
through its prompt path; until measured, T_d). A request served alone chooses as it would alone (its `AdaptiveGamma`).
Seeded requests keep their own timing-free schedule, so a seed reproduces the text whoever else is served
(`engine.timing_free`: except greedy ones on a batch-invariant target, whose text no schedule changes).

Where the models keep one cache each (llama.cpp, transformers), or the draft cannot be forked (a feature draft),
there is one sequence: requests run one at a time on the models themselves, in arrival order.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

import anyio
import torch

from ..adaptive import AdaptiveGamma, PassTimes, catch_up_cost
from ..drafts.base import Draft
from ..models.base import CausalLM
from .allot import Prices, Request, allot
from .threads import on_engine

POLL_SECONDS = 0.005  # how often a request waiting its turn looks for it (every 20th time, for its client)
GRACE_SECONDS = 0.005  # how long a pass waits for a request that holds a lease but is between two rounds
PASS_LOG = 64  # target passes kept for the page's live view
GAP_LOG = 64  # gaps before passes kept, of each model, for their median (`Scheduler.overhead`)
PREFILL_CHUNK = 32  # rows of a prompt per pass while others are served (`Scheduled.prefill`; a prompt path's own)
STEP_ROWS = 4  # a draft pass feeding more rows of a sequence is catching up (a prefill): not timed for T_d
RETIME_MOST = 64  # the most requests in a row that start from draft costs they did not measure (`Scheduler._learn`)
REDRAFT_FIRST, REDRAFT_MOST = 16, 1024  # allotments in a row without draft rows before their draft costs are
#                                         forgotten (`Scheduler._count_allotment`): at first, and at most


class Scheduler:
    def __init__(self, target: CausalLM, draft: Draft | None, sequences: int = 8, grace: float = GRACE_SECONDS):
        """sequences: at most this many requests generate at once (each a KV cache of the target and the draft's);
        1, or models that keep one cache, run one request at a time. grace: seconds a pass waits for a leased
        request that is between two rounds (so that its rows ride along), once all the others wait on it."""
        if sequences < 1:
            raise ValueError(f"sequences must be >= 1, got {sequences}")
        self.target, self.draft = target, draft
        self.batched = sequences > 1 and target.sequences and _forks(draft)
        self.sequences = sequences if self.batched else 1
        # Sequence 0 is the models' own (the service's between-requests work); leases get 1.. when batched.
        self._free = deque(range(1, sequences + 1) if self.batched else [0])
        self._queue: deque[Lease] = deque()  # leases waiting their turn, in arrival order
        self.leased: list[Lease] = []  # leases holding a sequence
        self._admission = threading.Lock()  # over _free, _queue and leased
        self._cond = threading.Condition()
        self._inside = 0  # threads inside a round
        self._waiting = 0  # of those, how many wait for a pass not yet started
        self._running = False  # a pass is running
        self._exclusive = False  # one thread runs alone (`exclusive`)
        self.grace = grace
        self._held_since: float | None = None  # when every thread inside began waiting on a lease outside
        self._queues: dict[int, tuple[CausalLM, list[_Pending]]] = {}  # id(model) -> (model, extends waiting)
        self.target_times = PassTimes(guess="proportional")  # T(rows) of batched target passes, seconds
        self.draft_times = PassTimes()  # T_d(rows) of batched draft passes (drafting steps), seconds
        self.catch_ups = PassTimes(guess="proportional")  # the same of draft passes that catch a draft up (prefills)
        # Seconds between a batched pass's start and the end of the pass before it, by whether it is the target's:
        # what the requests' threads do between passes (the rule, a draft's sampling, streaming), each pass's share
        self.gaps: dict[bool, deque[float]] = {True: deque(maxlen=GAP_LOG), False: deque(maxlen=GAP_LOG)}
        self._last_end: float | None = None  # when the last pass ended (time.perf_counter)
        self._target_passes = 0  # batched target passes run
        self._allotment: tuple[tuple, dict[int, int]] | None = None  # (when, what) `allotment` last decided
        self.passes: deque[dict] = deque(maxlen=PASS_LOG)  # recent target passes: whose rows, how many
        self.learned: Allotted | None = None  # the last finished request's controller: the next one starts from it
        self.untimed = 0  # requests with rounds alone since the last that timed the draft (they chose on older timings)
        self.retime_after = 1  # that many untimed, the next request starts with the draft's costs forgotten
        self.undrafted = 0  # allotments in a row that gave no draft rows on measured draft costs
        self.redraft_after = REDRAFT_FIRST  # that many undrafted, `draft_times` is forgotten
        self._ids = itertools.count(1)
        for index in self._free if self.batched else ():  # every sequence's caches made now, as a server sizes its
            Lease(self, 0).bind(index)                    # slots at start: no request pays for a fresh one

    # --- leases --------------------------------------------------------------------------------------------------

    def lease(self, prompt: Sequence[int] = ()) -> Lease:
        """A lease for one request, not yet holding a sequence (see `acquire`). prompt: its prompt's ids, when its
        prefill may reuse cells an earlier request left (`_hand_out`)."""
        return Lease(self, next(self._ids), prompt)

    async def acquire(self, lease: Lease, deadline: float | None,
                      is_disconnected: Callable[[], Awaitable[bool]] | None) -> bool:
        """Wait in arrival order until the lease holds a sequence (True); False if the client left meanwhile;
        TimeoutError past the deadline (time.monotonic seconds)."""
        with self._admission:
            if lease.index is not None:
                return True
            self._queue.append(lease)
            self._hand_out()
        polls = 0
        try:
            while lease.index is None:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError
                polls += 1
                if is_disconnected is not None and polls % 20 == 0 and await is_disconnected():
                    return False
                await anyio.sleep(POLL_SECONDS)
        finally:
            with self._admission:
                if lease.index is None:
                    self._queue.remove(lease)
        return True

    def release(self, lease: Lease) -> None:
        """Give the lease's sequence back (harmless when it holds none): the next lease in line gets it."""
        with self._admission:
            if lease.controller is not None:
                self._learn(lease.controller)
            if lease.index is not None:
                self._free.appendleft(lease.index)  # (the warmest first: see `_hand_out`)
                self.leased.remove(lease)
                lease.index = None
                self._hand_out()
        with self._cond:  # a pass held for this lease need not wait any more
            self._cond.notify_all()

    def _learn(self, controller: Allotted) -> None:
        """The next request starts from what this finished one measured, except where its draft costs may be stale.
        Those are timed only when drafting, so one bad timing (a pass slowed by another process on the cores)
        could keep every later request from drafting, and so from timing the draft again. After `retime_after`
        requests in a row that did not time the draft alone, the next starts with its costs forgotten (it drafts,
        and times it), the count doubling each time that finds drafting not worth it again (up to RETIME_MOST),
        back to 1 once a request times the draft of its own accord. A request served beside others throughout
        could not time the draft alone and counts for nothing: in a busy server the wait does not grow, and a
        re-timing that fell on such a request passes to the next. (The allotment's draft costs, timed on the steps
        it allots, have a rule of their own: `_count_allotment`.)"""
        self.learned = controller
        if not controller.alone:
            if controller.retimed:
                self.untimed = max(self.untimed, self.retime_after)
        elif controller.retimed:
            self.untimed, self.retime_after = 0, min(2 * self.retime_after, RETIME_MOST)
        elif controller.draft_timed:
            self.untimed, self.retime_after = 0, 1
        else:
            self.untimed += 1

    def _count_allotment(self, drafted: bool) -> None:
        """The allotment's draft costs are timed only on the drafting steps it allots, so, as with a lone request's
        (`_learn`), one bad timing could keep every later allotment from drafting. After `redraft_after` allotments
        in a row without draft rows they are forgotten: the next allotments price the draft as the last finished
        request measured it alone (kept fresh by `_learn`), else as free, and time it where that has them draft. The
        count doubles each time that finds drafting not worth it again (up to REDRAFT_MOST), and goes back to
        REDRAFT_FIRST once an allotment on timed costs gives draft rows."""
        if drafted:
            self.undrafted, self.redraft_after = 0, REDRAFT_FIRST
            return
        self.undrafted += 1
        if self.undrafted >= self.redraft_after:
            self.draft_times = PassTimes()
            self.undrafted, self.redraft_after = 0, min(2 * self.redraft_after, REDRAFT_MOST)

    def _hand_out(self) -> None:
        """The free sequences to the first leases in line (the admission lock held): to each, the free sequence
        whose cells hold the longest start of its prompt (a chat's earlier turns, left by its last request:
        `CausalLM.cached`), else the one given back last. So requests one at a time keep to one sequence, as the
        models alone do, and their cells stay warm."""
        while self._free and self._queue:
            lease = self._queue.popleft()
            index = max(self._free, key=lambda i: self._held(i, lease.prompt)) if len(self._free) > 1 \
                else self._free[0]
            self._free.remove(index)
            lease.bind(index)
            self.leased.append(lease)

    def _held(self, index: int, prompt: Sequence[int]) -> int:
        """How many of the prompt's leading tokens sequence `index` holds (every sequence exists from the start)."""
        return self.target.sequence(index).cached(prompt) if prompt else 0

    # --- rounds (in worker threads) ------------------------------------------------------------------------------

    def inside(self) -> contextlib.AbstractContextManager[None]:
        """Run one round of a request inside this: passes wait until every thread inside waits on one."""
        return self._round(alone=False)

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Run alone: wait until no thread is inside a round, and keep the others out meanwhile (timing passes)."""
        return self._round(alone=True)

    @contextlib.contextmanager
    def _round(self, alone: bool) -> Iterator[None]:
        with self._cond:
            while self._exclusive:
                self._cond.wait()
            if alone:
                self._exclusive = True
                while self._inside:
                    self._cond.wait()
            self._inside += 1
            self._held_since = None
        try:
            yield
        finally:
            with self._cond:
                self._inside -= 1
                if alone:
                    self._exclusive = False
                self._cond.notify_all()

    def submit(self, model: CausalLM, sequence: CausalLM, tokens: torch.Tensor, keep: int | None,
               lease: Lease, prompt: int = 0) -> torch.Tensor:
        """sequence.extend(tokens, keep), its first `prompt` rows prompt rows (`CausalLM.prefill`), run in the next
        pass of `model` with every other sequence waiting on it."""
        item = _Pending(sequence, tokens, keep, lease, prompt)
        with self._cond:
            self._queues.setdefault(id(model), (model, []))[1].append(item)
            self._waiting += 1
            while not item.done:
                delay = self._until_pass()
                if delay == 0:
                    self._run_pass()
                else:
                    self._cond.wait(delay)
        if item.error is not None:
            raise item.error
        return item.result

    def _until_pass(self) -> float | None:
        """Seconds until the next pass may start (0: now; None: not until a thread inside a round waits or the
        running pass ends). The condition's lock held."""
        if self._running or self._waiting < self._inside:
            self._held_since = None
            return None
        if self._inside >= len(self.leased):  # (a request alone, or everyone waiting)
            return 0
        now = time.monotonic()
        if self._held_since is None:
            self._held_since = now
        return max(0.0, self._held_since + self.grace - now)

    def _run_pass(self) -> None:
        """Run one queue's pass (the lock held on entry and exit, released while the pass runs)."""
        key = next((k for k, (m, items) in self._queues.items() if m is not self.target and items), None)
        model, items = self._queues.pop(key if key is not None else id(self.target))
        self._waiting -= len(items)
        self._running, self._held_since = True, None
        self._cond.release()
        try:
            start = time.perf_counter()
            if self._last_end is not None and len(items) > 1 and all(i.lease.last_pass for i in items):
                self.gaps[model is self.target].append(start - self._last_end)  # (not an idle spell's end)
            try:
                results = on_engine(model.extend_batch, [(i.sequence, i.tokens, i.keep) for i in items],
                                    [i.prompt for i in items])
                for item, result in zip(items, results, strict=True):
                    item.result = result
            except Exception as error:  # a bad part must not fail the others: each alone says whose it was
                if len(items) == 1:
                    items[0].error = error
                else:
                    for item in items:
                        try:
                            item.result = on_engine(model.extend_batch, [(item.sequence, item.tokens, item.keep)],
                                                    [item.prompt])[0]
                        except Exception as alone:
                            item.error = alone
            seconds = time.perf_counter() - start
            self._last_end = start + seconds
        finally:
            self._cond.acquire()
            self._running = False
            for item in items:
                item.done = True
            self._cond.notify_all()
        rows = sum(item.tokens.numel() for item in items)
        if model is self.target:
            self._target_passes += 1
            if not any(item.prompt for item in items):  # (prompt rows cost what their own path does)
                self.target_times.observe(rows, seconds)
            record = {"rows": [[item.lease.id, item.tokens.numel()] for item in items], "ms": seconds * 1e3}
            self.passes.append(record)
            for item in items:
                item.lease.last_pass = record
        elif max(item.tokens.numel() for item in items) <= STEP_ROWS:  # (not a draft's prefill: a drafting step)
            self.draft_times.observe(rows, seconds)
        else:
            self.catch_ups.observe(rows, seconds)

    # --- rows ----------------------------------------------------------------------------------------------------

    def overhead(self, target: bool) -> float:
        """Seconds a batched pass of the target (or of the draft) costs beyond its own time: the median gap before
        one, measured (0 until measured) where each of its requests had a target pass before. A new request's
        first pass may end an idle spell, which is no time the requests take between passes (while fewer than
        three gaps were measured, such a spell could be their median)."""
        gaps = sorted(self.gaps[target])
        return gaps[len(gaps) // 2] if gaps else 0.0

    def allotment(self, max_gamma: int) -> dict[int, int]:
        """`allot`, once between two target passes: the first request to choose its round computes it, on every
        request's latest measurements, and the others take their part of it. One decision for the pass, rather than
        one per request on measurements updated at different moments (which could have one request draft alone,
        paying a draft pass for its own rows, because it judged the others would draft too). A request's first
        choice decides again, on its own state: until then its draft's backlog (its whole prompt) is unknown. So
        does a choice whose proposal is a copy where the allotment priced the draft model's guess, or the reverse: a
        request of prompt lookup behind a draft model (`HybridDraft`) copies in one round and guesses in the next,
        and rows priced as a copy's (no draft pass) would have its model draft alone, first catching up on all it
        skipped."""
        when = (self._target_passes, tuple((lease.id, lease.controller is None or lease.controller._fresh,
                                            lease.controller is not None and lease.controller.copied)
                                           for lease in self.leased), max_gamma)  # (a choice's own state)
        if self._allotment is None or self._allotment[0] != when:
            self._allotment = (when, self.allot(max_gamma))
        return self._allotment[1]

    def allot(self, max_gamma: int) -> dict[int, int]:
        """gamma for each leased request with an `Allotted` controller, {lease id: gamma}: `allot` on every request's
        latest measurements and this scheduler's costs (see the module docstring)."""
        target = self.target_times if self.target_times.measured else \
            (lambda k: 1.0 + self.target.verify_slope * (k - 1))  # (untimed: in units of one pass)
        draft_times = self.draft_times  # (one object throughout: a retimed request may put a fresh one in its place)
        if not draft_times.measured and self.learned is not None and self.learned.draft_times.measured:
            draft_times = self.learned.draft_times  # until batched draft passes are timed (again): a lone request's
        timed = self.target_times.measured and draft_times.measured
        catching_up = self.catch_ups if self.catch_ups.measured else draft_times  # (a prefill's rows cost more)
        requests = [Request(lease.id, None) if (c := lease.controller) is None else
                    Request(lease.id, c.acceptance(c.copied), c.copied,
                            catch_up_cost(catching_up, c.behind) if timed else 0.0) for lease in self.leased]
        prices = Prices(target, draft_times if timed else None, self.overhead(True), self.overhead(False))
        gamma = allot(requests, prices, max_gamma)
        if timed:
            self._count_allotment(any(gamma[r.id] for r in requests if r.alpha is not None and not r.copied))
        return gamma


class Lease:
    """One request's place: the target (or a sequence of it) and a draft for it, bound to a sequence by `acquire`.
    `controller` is its gamma's `Allotted` controller when it has one (see `allotted`)."""

    def __init__(self, scheduler: Scheduler, lease_id: int, prompt: Sequence[int] = ()):
        self.scheduler, self.id, self.prompt = scheduler, lease_id, list(prompt)
        self.index: int | None = None
        self.controller: Allotted | None = None
        self.last_pass: dict | None = None  # the last target pass its rows were in (`Scheduler.passes`' record)
        self._views: list[Scheduled] = []
        if scheduler.batched:
            self.target: CausalLM = self._view(scheduler.target)
            self.draft = scheduler.draft.fork(self._view) if scheduler.draft is not None else None
        else:
            self.target, self.draft = scheduler.target, scheduler.draft

    def _view(self, model: CausalLM) -> Scheduled:
        view = Scheduled(model, self)
        self._views.append(view)
        return view

    def bind(self, index: int) -> None:
        self.index = index
        for view in self._views:
            view.sequence = view.model.sequence(index)

    def allotted(self) -> AdaptiveGamma:
        """A gamma controller for an unseeded "auto" request: alone it chooses as `AdaptiveGamma` does; beside
        others the scheduler allots its rows. Its first choice starts from what the last finished request's had
        measured."""
        self.controller = Allotted(self, self.scheduler.target.verify_slope)
        return self.controller


class Allotted(AdaptiveGamma):
    """`AdaptiveGamma` while its request is alone; beside others, the scheduler's allotment (`Scheduler.allot`).
    Rounds run beside others measure their acceptance but not their timings (which hold the others' rows). Its first
    choice starts from the last finished request's measurements (`Scheduler.learned`), not from the priors, so what
    one request learns of the models serves the next."""

    def __init__(self, lease: Lease, slope: float):
        super().__init__(prior_slope=slope)
        self.lease = lease
        self._shared = False
        self._fresh = True  # nothing chosen yet (its behind and remaining are not yet its own)
        self.copied = False  # whether its current round's proposal is a copy (`AdaptiveGamma.choose`)
        self.behind = 0  # tokens its draft must catch up on before its next guess (`Draft.behind`)
        self.remaining: int | None = None  # tokens its request may still write
        self.retimed = False  # it started with the draft's costs forgotten (`Scheduler._learn`)
        self.alone = False  # whether it chose a round alone (and so could time the draft: `Scheduler._learn`)

    def _learn_from(self, other: Allotted) -> None:
        state = {k: v for k, v in other.__dict__.items()
                 if k not in ("lease", "_shared", "_fresh", "draft_timed", "retimed", "alone")}
        self.__dict__.update(copy.deepcopy(state))
        scheduler = self.lease.scheduler
        with scheduler._admission:
            if scheduler.untimed >= scheduler.retime_after:
                self.forget_draft_costs()
                scheduler.untimed, self.retimed = 0, True

    def choose(self, copied: bool = False, behind: int = 0, remaining: int | None = None) -> int:
        scheduler = self.lease.scheduler
        if self._fresh:
            self._fresh = False
            if scheduler.learned is not None and scheduler.learned is not self:
                self._learn_from(scheduler.learned)
        self._shared = len(scheduler.leased) > 1
        self.copied, self.behind, self.remaining = copied, behind, remaining
        if not self._shared:
            self.alone = True
            return super().choose(copied, behind, remaining)
        return scheduler.allotment(self.max_gamma).get(self.lease.id, 0)

    def update(self, drafted: int, accepted: int, target_seconds: float | None = None,
               draft_seconds: float | None = None, draft_passes: int = 0, copied: bool = False,
               pass_times: Sequence[tuple[int, float]] = (), stopped: bool = False) -> None:
        if self._shared:
            target_seconds, draft_seconds, pass_times = None, None, ()
        super().update(drafted, accepted, target_seconds, draft_seconds, draft_passes, copied, pass_times, stopped)


class Scheduled(CausalLM):
    """A model's sequence for one lease: its passes queue for the scheduler's next batched pass of the model."""

    def __init__(self, model: CausalLM, lease: Lease):
        self.model, self.lease = model, lease
        self.sequence: CausalLM | None = None  # bound when the lease is acquired
        self.name, self.vocab_size, self.max_length = model.name, model.vocab_size, model.max_length
        self.batch_invariant, self.verify_slope = model.batch_invariant, model.verify_slope

    @property
    def length(self) -> int:
        return self._bound().length

    @property
    def weight_bytes(self) -> int:
        return self.model.weight_bytes

    def _bound(self) -> CausalLM:
        if self.sequence is None:
            raise RuntimeError("the lease holds no sequence: acquire it first")
        return self.sequence

    def rollback(self, length: int) -> None:
        self._bound().rollback(length)

    def clear(self) -> None:
        self._bound().clear()

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """tokens [k] -> logits [min(keep or k, k), V], from the next pass of the model. While other requests hold
        sequences, a prompt's prefill goes in chunks of PREFILL_CHUNK rows, one per pass, beside their rows: one long
        pass would stall every other request for the whole prefill (rows are bitwise the same however a pass is made
        up, on the engines that batch)."""
        return self._chunked(tokens.view(-1), keep, prompt=False)

    def prompt_rows(self, tokens: torch.Tensor, keep: int | None) -> int:
        return self.model.prompt_rows(tokens, keep)

    def prefill(self, tokens: torch.Tensor, keep: int | None = 1) -> torch.Tensor:
        """As `extend`, its rows before the last `keep` prompt rows (`CausalLM.prefill`), chunks included."""
        return self._chunked(tokens.view(-1), keep, prompt=True)

    def _chunked(self, tokens: torch.Tensor, keep: int | None, prompt: bool) -> torch.Tensor:
        """A prompt path's chunks end where its pieces do (`CausalLM.prompt_chunk`: at cells that are multiples of
        it), so that a piece is never cut across passes."""
        prompt = prompt and self.model.prompt_rows(tokens, keep) > 0  # (decided for the whole prompt)
        scheduler, chunk = self.lease.scheduler, prompt and self.model.prompt_chunk or PREFILL_CHUNK
        size = chunk - self._bound().length % chunk
        while keep and len(scheduler.leased) > 1 and len(tokens) - size >= keep:  # (keep 0 / None: all)
            scheduler.submit(self.model, self._bound(), tokens[:size], 1, self.lease, size if prompt else 0)
            tokens, size = tokens[size:], chunk
        rest = len(tokens) - min(keep or len(tokens), len(tokens))
        return scheduler.submit(self.model, self._bound(), tokens, keep, self.lease, rest if prompt else 0)


@dataclass
class _Pending:
    sequence: CausalLM
    tokens: torch.Tensor
    keep: int | None
    lease: Lease
    prompt: int = 0  # leading rows that are prompt rows
    done: bool = False
    result: torch.Tensor | None = None
    error: BaseException | None = field(default=None)


def _forks(draft: Draft | None) -> bool:
    """Whether the draft can draft for several sequences (every model it uses has sequences of its own)."""
    if draft is None:
        return True
    try:
        draft.fork(lambda model: model.sequence(1))
    except ValueError:
        return False
    return True
