"""The server's scheduler (server/scheduler.py): requests served together get exactly what they get alone, at 1, 2, 4
and 8 at once, on the toy and on the small model; leases in arrival order; a request that leaves frees its rows at
the next pass; a bad request fails alone; rows go where acceptance is highest."""

from __future__ import annotations

import functools
import threading
import time
from collections import deque

import anyio
import pytest
import torch

from specdecode import SamplingConfig
from specdecode.adaptive import PassTimes
from specdecode.drafts.hybrid import HybridDraft
from specdecode.drafts.model import ModelDraft
from specdecode.engine import Generation
from specdecode.server import threads
from specdecode.server.scheduler import PREFILL_CHUNK, REDRAFT_FIRST, Allotted, Scheduler
from specdecode.toy import prefix_pair

GREEDY = SamplingConfig(0)
SAMPLED = SamplingConfig(1.0)


def acquired(scheduler: Scheduler, prompt: list[int] = ()):
    lease = scheduler.lease(prompt)
    assert anyio.run(scheduler.acquire, lease, time.monotonic() + 30, None)
    return lease


def serve(scheduler: Scheduler, prompt: list[int], sampling: SamplingConfig, seed: int | None,
          max_new_tokens: int, stop: threading.Event | None = None, start: threading.Barrier | None = None
          ) -> list[int]:
    """One request as the service runs it: a lease, its generation round by round inside the scheduler (once all
    the requests at `start` hold theirs)."""
    lease = acquired(scheduler)
    if start is not None:
        start.wait(30)
    try:
        gamma = lease.allotted() if seed is None else "auto"
        generation = Generation(lease.target, lease.draft, prompt, max_new_tokens=max_new_tokens, gamma=gamma,
                                sampling=sampling, seed=seed)
        steps = iter(generation)
        while stop is None or not stop.is_set():
            with scheduler.inside():
                if next(steps, None) is None:
                    break
        return generation.new_tokens
    finally:
        scheduler.release(lease)


def together(scheduler: Scheduler, requests: list[tuple[list[int], SamplingConfig, int | None]],
             max_new_tokens: int) -> list[list[int]]:
    outputs: list = [None] * len(requests)
    errors = []
    start = threading.Barrier(len(requests))

    def client(i: int) -> None:
        try:
            outputs[i] = serve(scheduler, *requests[i], max_new_tokens, start=start)
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors and all(not t.is_alive() for t in threads), errors
    return outputs


def requests_for(vocab: int, n: int) -> list[tuple[list[int], SamplingConfig, int | None]]:
    """n requests of different prompt lengths: greedy unseeded (rows allotted), greedy seeded, sampled seeded."""
    out = []
    for i in range(n):
        prompt = [(7 * i + 3 * j + 1) % vocab for j in range(2 + 3 * i)]
        sampling, seed = [(GREEDY, None), (GREEDY, 100 + i), (SAMPLED, 200 + i)][i % 3]
        out.append((prompt, sampling, seed))
    return out


def alone(target, draft, request, max_new_tokens: int) -> list[int]:
    prompt, sampling, seed = request
    return Generation(target, draft, prompt, max_new_tokens=max_new_tokens, gamma="auto", sampling=sampling,
                      seed=seed).run().new_tokens


@pytest.mark.parametrize("clients", [1, 2, 4, 8])
def test_toy_requests_served_together_get_what_they_get_alone(clients):
    target, draft_model = prefix_pair(noise=1.0)
    # (a long grace: a pass waits for a request between two rounds, so that they are surely served together)
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=8, grace=2.0)
    assert scheduler.batched
    requests = requests_for(target.vocab_size, clients)
    expected = [alone(target, ModelDraft(draft_model), r, 30) for r in requests]
    assert together(scheduler, requests, 30) == expected
    if clients > 1:  # and they were served together: some target pass carried several requests' rows
        assert max(len(p["rows"]) for p in scheduler.passes) > 1


@pytest.mark.parametrize("clients", [1, 2, 4, 8])
def test_small_model_requests_served_together_get_what_they_get_alone(clients, smollm2_native):
    from specdecode.load import load_draft

    target = smollm2_native.model
    draft = load_draft("trained", smollm2_native)
    scheduler = Scheduler(target, draft, sequences=8, grace=2.0)
    assert scheduler.batched
    tok = smollm2_native.tokenizer
    texts = ["Write a haiku about rain.", "def fibonacci(n):", "List three colours.", "What is 12 + 30?"]
    requests = [(tok.encode(texts[i % 4]) + [i], *requests_for(10, clients)[i][1:]) for i in range(clients)]
    expected = [alone(target, draft, r, 12) for r in requests]
    assert together(scheduler, requests, 12) == expected


def test_a_long_prompt_is_prefilled_in_chunks_beside_the_other_requests_rows():
    """While another request is served, a prompt of 3 chunks and a bit is prefilled PREFILL_CHUNK rows a pass (each
    pass also carrying the other's rows), and both answers are what they are alone."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4, grace=2.0)
    long = [(5 * j + 2) % target.vocab_size for j in range(3 * PREFILL_CHUNK + 5)]
    requests = [(long, GREEDY, 1), ([1, 2, 3], GREEDY, 2)]
    expected = [alone(target, ModelDraft(draft_model), r, 20) for r in requests]
    assert together(scheduler, requests, 20) == expected
    rows = [n for p in scheduler.passes for _, n in p["rows"]]
    assert max(rows) == PREFILL_CHUNK and rows.count(PREFILL_CHUNK) == 3
    assert any(len(p["rows"]) == 2 and max(n for _, n in p["rows"]) == PREFILL_CHUNK for p in scheduler.passes)


def test_a_pass_waits_for_a_request_between_rounds_only_up_to_the_grace():
    target, _ = prefix_pair()
    scheduler = Scheduler(target, None, sequences=2, grace=0.25)
    idle = acquired(scheduler)  # holds a sequence but runs no round
    tokens = []
    worker = threading.Thread(target=lambda: tokens.extend(serve(scheduler, [1, 2, 3], GREEDY, 1, 4)))
    started = time.monotonic()
    worker.start()
    worker.join(30)
    assert len(tokens) == 4 and time.monotonic() - started >= 4 * 0.25  # each pass waited, none for ever
    scheduler.release(idle)
    started = time.monotonic()
    assert len(serve(scheduler, [1, 2, 3], GREEDY, 1, 4)) == 4 and time.monotonic() - started < 4 * 0.25


def test_leases_are_handed_out_in_arrival_order():
    target, _ = prefix_pair()
    scheduler = Scheduler(target, None, sequences=1)
    holder = acquired(scheduler)
    order = []

    async def scenario():
        async def wait(lease):
            assert await scheduler.acquire(lease, time.monotonic() + 10, None)
            order.append(lease.id)
            await anyio.sleep(0.02)
            scheduler.release(lease)

        leases = [scheduler.lease() for _ in range(4)]
        async with anyio.create_task_group() as group:
            for lease in reversed(leases):  # arrivals in the order 4, 3, 2, 1 of their making
                group.start_soon(wait, lease)
                await anyio.sleep(0.02)
            scheduler.release(holder)
        assert order == [lease.id for lease in reversed(leases)]

    anyio.run(scenario)


def test_a_prompt_gets_the_free_sequence_that_holds_its_start(smollm2_native, monkeypatch):
    """A chat's next turn goes to the sequence its last turn left its cells in, whoever came between, and reuses
    them; a prompt that no sequence holds, or a lease given no prompt, gets the sequence given back last (so requests
    one at a time keep to one sequence)."""
    model = smollm2_native.model
    monkeypatch.setattr(model, "feature_layers", ())  # (a feature draft loaded by an earlier test sets them)
    scheduler = Scheduler(model, None, sequences=3, grace=0.0)
    turns = {name: (torch.arange(40) * step % 5000 + start).tolist() for name, step, start in (("a", 37, 100),
                                                                                              ("b", 41, 200))}

    def generate(lease, prompt: list[int]) -> None:
        Generation(lease.target, None, prompt, max_new_tokens=3, gamma=1, sampling=GREEDY).run()

    def served(prompt: list[int]) -> int:
        """The sequence the request was served on."""
        lease = acquired(scheduler, prompt)
        try:
            generate(lease, prompt)
            return lease.index
        finally:
            scheduler.release(lease)

    assert served([1, 2, 3]) == served([4, 5, 6]) == 1  # one at a time: one sequence
    first, second = acquired(scheduler, turns["a"]), acquired(scheduler, turns["b"])  # two users at once
    assert (first.index, second.index) == (1, 2)
    generate(first, turns["a"])
    generate(second, turns["b"])
    scheduler.release(first)
    scheduler.release(second)  # (free now: 2, 1, 3)
    before = model.reused_tokens
    assert served(turns["a"] + [9]) == 1 and model.reused_tokens - before >= 40  # (free now: 1, 2, 3)
    assert served(turns["b"] + [7, 8]) == 2  # (free now: 2, 1, 3)
    assert served([5, 6, 7]) == 2  # held nowhere: the one given back last
    lease = acquired(scheduler, ())  # no prompt given (a cold request): likewise
    assert lease.index == 2
    scheduler.release(lease)


def test_a_waiting_lease_gives_up_at_its_deadline_and_when_its_client_leaves():
    target, _ = prefix_pair()
    scheduler = Scheduler(target, None, sequences=1)
    holder = acquired(scheduler)

    async def gone() -> bool:
        return True

    with pytest.raises(TimeoutError):
        anyio.run(scheduler.acquire, scheduler.lease(), time.monotonic() + 0.05, None)
    assert anyio.run(scheduler.acquire, scheduler.lease(), time.monotonic() + 10, gone) is False
    scheduler.release(holder)
    assert acquired(scheduler).index == 0  # neither kept a place in line


def test_a_request_that_leaves_frees_its_rows_at_the_next_pass():
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, None, sequences=4)
    stop = threading.Event()
    prompt = [1, 2, 3]
    leaver = threading.Thread(target=serve, args=(scheduler, prompt, GREEDY, 1, 10_000, stop))
    leaver.start()
    time.sleep(0.2)
    stayer_tokens = []
    stayer = threading.Thread(target=lambda: stayer_tokens.extend(serve(scheduler, prompt, GREEDY, 2, 400)))
    stayer.start()
    time.sleep(0.1)
    stop.set()
    leaver.join(30)
    seen = len(scheduler.passes)
    stayer.join(60)
    assert len(stayer_tokens) == 400
    later = list(scheduler.passes)[-max(1, len(scheduler.passes) - seen):]
    assert all(len(p["rows"]) == 1 for p in later[1:])  # after the leaver's last pass, only the stayer's rows
    assert not scheduler.leased


def test_a_bad_part_of_a_batched_pass_fails_alone():
    target, _ = prefix_pair()
    target.max_length = 8  # (shared by its sequences)
    scheduler = Scheduler(target, None, sequences=2)
    good, bad = acquired(scheduler), acquired(scheduler)
    answers = {}

    def call(lease, tokens):
        with scheduler.inside():
            try:
                answers[lease.id] = lease.target.extend(torch.tensor(tokens))
            except IndexError as error:
                answers[lease.id] = error

    threads = [threading.Thread(target=call, args=(good, [1, 2, 3])),
               threading.Thread(target=call, args=(bad, list(range(9))))]  # past the window
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert isinstance(answers[bad.id], IndexError)
    assert isinstance(answers[good.id], torch.Tensor) and answers[good.id].shape == (3, target.vocab_size)


def test_rows_go_to_the_requests_whose_drafts_are_accepted():
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    sure, unsure = acquired(scheduler), acquired(scheduler)
    for lease, alpha in ((sure, 0.95), (unsure, 0.3)):
        controller = lease.allotted()
        controller._accepted, controller._rejected = 1000 * alpha, 1000 * (1 - alpha)
    flat_rows(scheduler, 0.010)  # nearly flat: rows are cheap
    scheduler.draft_times.observe(1, 0.001)
    cheap = scheduler.allot(10)
    assert cheap[sure.id] > cheap[unsure.id] >= 0 and cheap[sure.id] >= 4
    for k, seconds in ((2, 0.02), (4, 0.04), (8, 0.08)):  # each row a full pass: speculation cannot pay
        for _ in range(200):
            scheduler.target_times.observe(k, seconds)
    assert scheduler.allot(10) == {sure.id: 0, unsure.id: 0}


def test_rows_of_a_copy_cost_no_draft_pass():
    """Two requests with the same acceptance where a draft pass costs as much as a target pass: the model's guesses
    get no rows, a proposal copied from the context (no draft pass) gets them while rows are cheap."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    guess, copy_ = acquired(scheduler), acquired(scheduler)
    for lease in (guess, copy_):
        controller = lease.allotted()
        controller._accepted, controller._rejected = controller._copied = [900.0, 100.0]
    copy_.controller.copied = True
    flat_rows(scheduler, 0.010)  # nearly flat: rows are cheap
    scheduler.draft_times.observe(1, 0.01)
    allotted = scheduler.allot(10)
    assert allotted[guess.id] == 0 and allotted[copy_.id] >= 4


def test_a_draft_pass_costs_what_its_rows_cost():
    """Three requests alike (alpha 0.9) on cheap target rows, the draft's pass 4 ms for one row: where a batched
    draft pass costs about that whatever its rows, all three draft alike and longer than one (each pass carries a row
    of each: a second pass would not pay for one request alone, but does for three); where each row beyond the first
    adds 5 ms to a pass, the rows go to one request's longer draft instead (a pass of one row each, but the first:
    it also feeds the last round's last draft when that round kept all). A first guess alone would not pay there:
    the rows come five at once."""
    target, draft_model = prefix_pair()
    allotted = {}
    for name, per_row in (("flat", 0.0001), ("per row", 0.005)):
        scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
        leases = [acquired(scheduler) for _ in range(3)]
        for lease in leases:
            controller = lease.allotted()
            controller._accepted, controller._rejected = 900.0, 100.0
        for k, seconds in ((3, 0.0203), (6, 0.0206), (12, 0.0212)):  # nearly flat: target rows are cheap
            scheduler.target_times.observe(k, seconds)
        for rows in (1, 2, 3):
            scheduler.draft_times.observe(rows, 0.004 + per_row * (rows - 1))
        allotted[name] = sorted(scheduler.allot(10).values())
    assert len(set(allotted["flat"])) == 1 and allotted["flat"][0] >= 2 and allotted["per row"] == [0, 0, 5]


def test_a_draft_that_is_behind_gets_rows_only_where_its_catch_up_pays_in_the_round():
    """Two requests alike (alpha 0.9, 2000 tokens left) on cheap target rows, the draft's pass 4 ms + 1 ms a row fed.
    Where one's draft has yet to feed 300 tokens (its deferred prefill), the catch-up (300 ms) is charged whole to the
    round that pays it, however long the request has left (beside others a drafting spell cannot be counted on to last
    and pay it back): it gets no rows, the other does. Two tokens behind (2 ms), both draft alike."""
    target, draft_model = prefix_pair()
    allotted = {}
    for behind in (300, 2):
        scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
        cold, warm = acquired(scheduler), acquired(scheduler)
        for lease in (cold, warm):
            controller = lease.allotted()
            controller._accepted, controller._rejected = 900.0, 100.0
            controller.remaining = 2000
        cold.controller.behind = behind
        flat_rows(scheduler, 0.020)  # nearly flat: target rows are cheap
        for rows in (1, 2, 4):
            scheduler.draft_times.observe(rows, 0.004 + 0.001 * (rows - 1))
        gamma = scheduler.allot(10)
        allotted[behind] = (gamma[cold.id], gamma[warm.id])
    assert allotted[300][0] == 0 < allotted[300][1]
    assert allotted[2][0] == allotted[2][1] > 0


def test_a_first_draft_pass_also_feeds_the_last_rounds_last_draft():
    """Two requests (alpha 0.9, one guess at most) on cheap target rows (20 ms + 1 ms a row), the draft's pass 2 ms +
    10 ms a row beyond the first. A round that kept its guess leaves the draft behind by it (the draft never fed its
    own last guess), so the next round's first draft pass feeds it too: for both, a pass of 2 + 2 x 0.9 rows (30 ms),
    which the 1.8 more tokens expected do not pay for. Priced as a row per request (a 2 ms pass for one of them),
    one request drafted. Where a row costs the draft 0.1 ms, both draft."""
    target, draft_model = prefix_pair()
    allotted = {}
    for per_row in (0.010, 0.0001):
        scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
        for lease in (acquired(scheduler), acquired(scheduler)):
            controller = lease.allotted()
            controller._accepted, controller._rejected = 900.0, 100.0
        for k, seconds in ((2, 0.020), (3, 0.021), (4, 0.022)):
            scheduler.target_times.observe(k, seconds)
        for rows in (1, 2, 4):
            scheduler.draft_times.observe(rows, 0.002 + per_row * (rows - 1))
        allotted[per_row] = sorted(scheduler.allot(1).values())
    assert allotted[0.010] == [0, 0] and allotted[0.0001] == [1, 1]


def flat_rows(scheduler: Scheduler, base: float) -> None:
    """Batched target passes of 2, 4 and 8 rows timed at base + 0.1 ms a row, as if measured."""
    for k in (2, 4, 8):
        scheduler.target_times.observe(k, base + 0.0001 * k)


def cheap_rows(scheduler: Scheduler) -> None:
    """Target passes of 5 ms + 7.5 ms a row, draft passes of 2 ms: timings, as if measured."""
    scheduler.target_times = PassTimes(guess="proportional")
    for k, seconds in ((2, 0.020), (3, 0.0275), (4, 0.035)):
        scheduler.target_times.observe(k, seconds)
    scheduler.draft_times.observe(2, 0.002)


def plain_rounds(scheduler: Scheduler, leases: list, between: float = 0.0, rounds: int = 4) -> None:
    """Each lease's thread runs `rounds` one-token target passes, taking `between` seconds before each."""

    def run(lease) -> None:
        for _ in range(rounds):
            with scheduler.inside():
                time.sleep(between)
                lease.target.extend(torch.tensor([1]))

    threads_ = [threading.Thread(target=run, args=(lease,)) for lease in leases]
    for thread in threads_:
        thread.start()
    for thread in threads_:
        thread.join(10)


def test_each_pass_is_charged_the_time_the_requests_take_between_passes():
    """Two requests (alpha 0.9, one guess at most): drafting pays, narrowly (3.8 tokens for a 35 ms target pass and
    a 2 ms draft pass, against 2 for 20 ms). Where the requests' threads take 20 ms between passes (the rule,
    sampling, streaming: here a sleep, measured on real passes as the gap before each), a drafting round of two
    passes costs 77 ms against a plain round's 40: plain wins. Before, the time between passes was not counted, and
    drafting won on paper while losing in the server (seen on the AMX Xeon at 4 clients: 3.8 ms a pass)."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    leases = [acquired(scheduler), acquired(scheduler)]
    plain_rounds(scheduler, leases, between=0.02)
    assert 0.015 < scheduler.overhead(True) < 0.2 and scheduler.overhead(False) == 0.0
    scheduler.gaps[False].extend(scheduler.gaps[True])  # (the draft's passes alike)
    for lease in leases:
        controller = lease.allotted()
        controller._accepted, controller._rejected = 900.0, 100.0
    cheap_rows(scheduler)
    assert scheduler.allot(1) == {leases[0].id: 0, leases[1].id: 0}
    scheduler.gaps = {True: deque(), False: deque()}  # no time between passes: drafting pays
    assert scheduler.allot(1) == {leases[0].id: 1, leases[1].id: 1}


def test_an_idle_spell_is_no_time_between_passes():
    """Two requests arriving a second after the last pass ended: their first pass ends an idle spell, which is not
    counted as time the requests take between passes; the gaps between their later passes are."""
    target, _ = prefix_pair()
    scheduler = Scheduler(target, None, sequences=4)
    leases = [acquired(scheduler), acquired(scheduler)]
    scheduler._last_end = time.perf_counter() - 1.0  # (a pass ended a second ago; nothing since)
    plain_rounds(scheduler, leases)
    assert scheduler.gaps[True] and max(scheduler.gaps[True]) < 0.5


def test_requests_between_two_target_passes_take_their_parts_of_one_allotment():
    """The first request to choose its round after a target pass decides every request's rows, on what each has
    measured; the others take their part of that allotment, however their measurements moved since, until the next
    target pass. Before, each decided alone, on the others' measurements as they stood then: one could draft alone,
    paying a draft pass for its own rows, having judged that the others would draft too."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    leases = [acquired(scheduler), acquired(scheduler)]
    controllers = [lease.allotted() for lease in leases]
    for controller in controllers:
        controller._accepted, controller._rejected = 900.0, 100.0
    cheap_rows(scheduler)

    def target_pass() -> None:
        with scheduler.inside():  # (the other request between rounds: the pass runs after the grace)
            leases[0].target.extend(torch.tensor([1]))
        cheap_rows(scheduler)  # (the toy's pass timed in place of the costs given)

    for controller in controllers:  # each a first choice, on its own state
        controller.choose()
    target_pass()
    assert controllers[0].choose() > 0  # the allotment for this pass, both drafting
    controllers[1]._accepted, controllers[1]._rejected = 5.0, 995.0  # its acceptance falls before it chooses
    assert controllers[1].choose() > 0  # its part of the allotment made for this pass
    target_pass()
    assert controllers[1].choose() == 0  # a new allotment, on its acceptance now


def test_forgotten_batched_draft_costs_are_priced_as_a_lone_request_measured_them():
    """Before any batched draft pass is timed, or once the allotment's draft costs are forgotten, the draft is priced
    as the last finished request measured it alone, not as free: where that says drafting does not pay beside the
    others, the requests do not all start drafting just to time it, each first catching its draft up on everything
    written since it last ran (seen on the AMX Xeon at 4 clients: about three such catch-ups a load, of 150-400
    rows and 0.3-0.5 s each, then plain again)."""
    target, draft_model = prefix_pair()
    allotted = {}
    for draft_pass in (0.030, 0.001):
        scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
        lone = acquired(scheduler)
        controller = lone.allotted()
        for _ in range(10):  # alone: a target pass of 2 tokens 55 ms, a draft pass of draft_pass
            controller.update(1, 1, 0.055, draft_pass, 1)
        scheduler.release(lone)
        for lease in [acquired(scheduler) for _ in range(4)]:
            controller = lease.allotted()
            controller._accepted, controller._rejected = 900.0, 100.0
        for k, seconds in ((4, 0.060), (8, 0.100), (16, 0.180)):
            scheduler.target_times.observe(k, seconds)
        assert not scheduler.draft_times.measured
        allotted[draft_pass] = max(scheduler.allot(10).values())
    assert allotted[0.030] == 0 < allotted[0.001]


def test_a_catch_up_is_priced_as_catch_ups_were_measured_to_cost():
    """Two requests alike (alpha 0.9) on cheap target rows, the draft's step 4 ms + 1 ms a row; one's draft has yet
    to feed 6 tokens (it copied its last round). Priced on the steps' line (6 ms) the catch-up pays in the round, and
    both draft. Where the draft's catch-up passes were measured at 10 ms a row (a prompt's rows on its prompt path, or
    a dearer engine), the 60 ms catch-up does not: only the other drafts. Before, catch-ups were priced on the steps'
    line alone (on the AMX Xeon it said ~1.3 ms a row against ~2.5 measured)."""
    target, draft_model = prefix_pair()
    allotted = {}
    for per_row in (None, 0.010):
        scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
        cold, warm = acquired(scheduler), acquired(scheduler)
        for lease in (cold, warm):
            controller = lease.allotted()
            controller._accepted, controller._rejected = 900.0, 100.0
            controller.remaining = 60
        cold.controller.behind = 6
        flat_rows(scheduler, 0.020)  # nearly flat: target rows are cheap
        for rows in (1, 2, 4):
            scheduler.draft_times.observe(rows, 0.004 + 0.001 * (rows - 1))
        for rows in (40, 80) if per_row else ():
            scheduler.catch_ups.observe(rows, 0.004 + per_row * rows)
        gamma = scheduler.allot(10)
        allotted[per_row] = (gamma[cold.id], gamma[warm.id])
    assert allotted[None][0] > 0 and allotted[0.010][0] == 0 < allotted[0.010][1]


def test_a_request_decides_the_allotment_again_at_its_first_choice():
    """The allotment made by the first request to choose after a pass takes a new request's state as it stands
    before its first choice (its draft's backlog unknown: 0). That request's first choice decides again, on its own
    state: its draft must first feed its whole prompt (300 tokens, with 4 to write), which does not pay."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    old, new = acquired(scheduler), acquired(scheduler)
    for lease in (old, new):
        controller = lease.allotted()
        controller._accepted, controller._rejected = 900.0, 100.0
    flat_rows(scheduler, 0.020)  # nearly flat: target rows are cheap
    for rows in (1, 2, 4):
        scheduler.draft_times.observe(rows, 0.004 + 0.001 * (rows - 1))
    assert old.controller.choose(remaining=60) > 0 and scheduler.allotment(10)[new.id] > 0  # (new: backlog unknown)
    assert new.controller.choose(behind=300, remaining=4) == 0


def test_a_request_whose_proposal_stops_being_a_copy_decides_the_allotment_again():
    """Prompt lookup behind a draft model: a request that copied last round and guesses with the model in this one.
    Where a draft pass costs as much as a target pass and target rows are cheap, a copy's rows pay and the model's
    do not. The allotment made by another request's choice priced this one as a copy (its state at its last choice);
    its own choice, now a guess, decides again and gets no rows. Before, it took the copy's rows and its model
    drafted alone, first catching up on every token it had skipped (seen at 4 clients with lookup+0.5B on the AMX
    Xeon: 4 s of draft passes a load, against ~1 s with the 0.5B alone)."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, HybridDraft(ModelDraft(draft_model)), sequences=4)
    other, switcher = acquired(scheduler), acquired(scheduler)
    for lease in (other, switcher):
        controller = lease.allotted()
        controller._accepted, controller._rejected = controller._copied = [900.0, 100.0]
        controller._fresh = False
    switcher.controller.copied = True  # (its last round's proposal)
    flat_rows(scheduler, 0.010)  # nearly flat: rows are cheap
    scheduler.draft_times.observe(1, 0.01)
    other.controller.choose(remaining=60)
    assert scheduler.allotment(10)[switcher.id] >= 4  # (priced as the copy it was)
    assert switcher.controller.choose(copied=False, remaining=60) == 0
    assert switcher.controller.choose(copied=True, remaining=60) >= 4


def test_a_request_starts_from_what_the_last_one_measured():
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=2)
    first = acquired(scheduler)
    controller = first.allotted()
    for _ in range(20):
        controller.update(4, 4, 0.01, 0.002, 4)
    scheduler.release(first)
    second = acquired(scheduler).allotted()
    second.choose()  # (its first choice starts from the last request's measurements)
    assert second.alpha == controller.alpha > Allotted(first, target.verify_slope).alpha
    assert second.target_time(5) == controller.target_time(5)


def lone_request(scheduler: Scheduler, draft_pass: float) -> list[int]:
    """One request alone (alpha 0.9, T(k) = 10 ms + 1 ms a row, 60 tokens to write after a 40-token prompt): its
    choices, the draft's first pass feeding the prompt (a pass costing draft_pass + 2 ms a token fed)."""
    lease = acquired(scheduler)
    controller = lease.allotted()
    controller._accepted, controller._rejected = 900.0, 100.0
    behind, chosen = 40, []
    for remaining in range(60, 0, -1):
        gamma = controller.choose(behind=behind, remaining=remaining)
        chosen.append(gamma)
        if gamma:
            passes = [(1 + behind, draft_pass + 0.002 * behind)] + [(1, draft_pass)] * (gamma - 1)
            controller.update(gamma, gamma, 0.010 + 0.001 * gamma, sum(s for _, s in passes), gamma,
                              pass_times=tuple(passes))
            behind = 0
        else:
            controller.update(0, 0, 0.010)
            behind += 1
    scheduler.release(lease)
    return chosen


def test_draft_costs_timed_in_a_bad_moment_do_not_keep_drafting_off_for_good():
    """A request timed the draft while another process held the cores: 40x its true cost. Every later request, alone,
    a new prompt for its draft to catch up on, then priced the catch-up out of reach, decoded plainly and never timed
    the draft again (seen in `bench --clients` on a Zen 5 EPYC: 1.00 tokens per target call, 0.79x the library).
    Now, after a request that did not time the draft, the next starts with the draft's costs forgotten, drafts, and
    times it; where the new timing says drafting does not pay either, the wait before the next try doubles."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=2)
    request = functools.partial(lone_request, scheduler)
    assert max(request(0.080)) > 0  # (costs unmeasured: it drafts, and times a pass at 80 ms, 40x the truth)
    assert max(request(0.002)) == 0  # priced out of reach: plain throughout, the draft never timed
    assert max(request(0.002)) > 0 and scheduler.learned.retimed  # started with the costs forgotten: drafts again
    assert max(request(0.002)) > 0 and scheduler.retime_after == 1  # of its own accord: the wait back to 1
    # A draft that truly costs too much is retimed after 1, 2, 4, ... requests that did not time it.
    tries = [max(request(0.080)) > 0 for _ in range(16)]
    assert [i for i, tried in enumerate(tries) if tried] == [0, 2, 5, 10]


def test_requests_served_beside_others_throughout_do_not_delay_timing_the_draft_again():
    """Requests that never had a round alone could not time the draft alone: they neither count towards the next
    re-timing nor, when one of them was to re-time it, use that turn up. Before, a busy server's every request
    counted, so after a bad timing the wait grew to 64 requests, and a re-timing that fell on a shared request was
    lost while the wait doubled."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=2)
    assert max(lone_request(scheduler, 0.080)) > 0  # a bad timing: 40x the draft's true cost
    assert max(lone_request(scheduler, 0.002)) == 0  # priced out of reach: the next request is to re-time
    for _ in range(3):  # two at a time, beside each other throughout
        leases = [acquired(scheduler), acquired(scheduler)]
        controllers = [lease.allotted() for lease in leases]
        for controller in controllers:
            controller.choose(behind=40, remaining=60)  # (an allotment: the other holds a sequence too)
        assert len(scheduler.leased) == 2 and not any(controller.alone for controller in controllers)
        for lease in leases:
            scheduler.release(lease)
    assert (scheduler.untimed, scheduler.retime_after) == (1, 1)
    assert max(lone_request(scheduler, 0.002)) > 0 and scheduler.learned.retimed  # alone again: it re-times


def test_draft_costs_the_allotment_timed_in_a_bad_moment_are_forgotten_after_a_while():
    """Four requests at once (alpha 0.9, a target pass of 4-16 rows 60-66 ms). A drafting step timed while another
    process held the cores (1 s) kept every later allotment plain, and so from timing a step again (seen in a live
    server on the AMX Xeon: 1.00 tokens per target call under load after a hogged warm-up). Now the allotment's draft
    costs are forgotten after REDRAFT_FIRST allotments without draft rows, twice as many each time drafting turns out
    not to pay again, and the wait is back to the first once timed costs call for drafting."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    for lease in [acquired(scheduler) for _ in range(4)]:
        controller = lease.allotted()
        controller._accepted, controller._rejected = 900.0, 100.0
    for k, seconds in ((4, 0.060), (8, 0.062), (16, 0.066)):
        for _ in range(50):
            scheduler.target_times.observe(k, seconds)

    def plain_allotments() -> int:
        """Allotments without draft rows before one with them."""
        return next(n for n in range(1000) if max(scheduler.allot(10).values()) > 0)

    scheduler.draft_times.observe(4, 1.0)  # the bad timing
    assert plain_allotments() == REDRAFT_FIRST  # then forgotten: the next allotment drafts, and its steps are timed
    scheduler.draft_times.observe(4, 1.0)  # as badly again (or drafting truly does not pay): the wait doubles
    assert plain_allotments() == 2 * REDRAFT_FIRST
    scheduler.draft_times.observe(4, 0.004)  # timed as it is
    assert plain_allotments() == 0 and min(scheduler.allot(10).values()) >= 1
    assert (scheduler.undrafted, scheduler.redraft_after) == (0, REDRAFT_FIRST)


def test_every_batched_pass_runs_on_the_engine_thread(monkeypatch):
    target, draft_model = prefix_pair(noise=1.0)
    seen = []
    for model in (target, draft_model):
        extend_batch = model.extend_batch
        monkeypatch.setattr(model, "extend_batch", lambda parts, prompt_rows=None, f=extend_batch: (seen.append(
            threading.get_ident()), f(parts, prompt_rows))[1])
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4, grace=2.0)
    together(scheduler, requests_for(target.vocab_size, 4), 12)
    assert len(seen) > 4 and set(seen) == {threads.on_engine(threading.get_ident)}


def test_a_first_pass_of_four_prompts_does_not_make_every_row_look_free():
    """Four requests arriving together (alpha 0.9): the scheduler's first target pass is their prompts' prefill, 128
    rows in 1.44 s. A line through that one pass cannot tell a fixed cost from a cost per row; taken flat, every row
    looked free and each request got the most drafts (passes of 30-68 rows followed, keeping the line flat). Taken
    proportional to the rows, the next passes decode plainly until passes of other sizes are measured."""
    target, draft_model = prefix_pair()
    scheduler = Scheduler(target, ModelDraft(draft_model), sequences=4)
    leases = [acquired(scheduler) for _ in range(4)]
    for lease in leases:
        controller = lease.allotted()
        controller._accepted, controller._rejected = 900.0, 100.0
    scheduler.target_times.observe(128, 1.44)
    scheduler.draft_times.observe(4, 0.022)
    assert scheduler.allot(10) == dict.fromkeys((lease.id for lease in leases), 0)
    for k, seconds in ((4, 0.060), (8, 0.062), (16, 0.066)):  # then passes measured nearly flat: rows are cheap
        for _ in range(200):
            scheduler.target_times.observe(k, seconds)
    assert min(scheduler.allot(10).values()) >= 1
