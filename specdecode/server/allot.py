"""Which draft positions a target pass carries when it carries several requests' rows (`allot`): the paper's
arithmetic (expected tokens per round, and what the round costs) applied to a batch.

Each request's next token comes first, then the draft positions that raise the round's expected tokens per second
most (a request's j-th draft is kept with probability alpha^j, its measured acceptance): rows for one request, or a
row or more for each of the requests drafting longest (which share the draft passes their rows need), until none do.
A round costs the target pass of all its rows, T(rows), plus the draft's passes: its j-th pass carries a row for each
request drafting j or more tokens with the model, the first also the last round's last draft of each whose last round
kept every draft (probability alpha^gamma), and costs T_d(those rows); a proposal copied from the context (prompt
lookup's) runs none: its rows cost only their share of the target pass. Each pass also costs the time between it and
the pass before, while the requests' threads take its results and make the next rows (the rule, a draft's sampling,
streaming), so drafting, which adds passes, is charged for them. A draft that is behind (its deferred prompt prefill,
or text written without it: `Draft.behind`) first catches up, and that catch-up is charged whole to the round that
pays it. (Alone, a request spreads it over the tokens it has left: `adaptive.catch_up_owed`. Beside others the
allotment decides again every round, and copies and the others' rows cut drafting spells short, so the spell a
catch-up starts cannot be counted on to pay it back: spread, nearly every request of two paid its draft's whole prompt
prefill for model rounds that gained nothing, docs/bench/fair-allotment.) So a request whose draft has yet to read its
prompt drafts with the model beside others only in a round worth that prefill; else it copies or decodes plainly.

Where the costs come from (measured lines, the gaps, the catch-ups) is the scheduler's business (`Scheduler.allot`);
this module only prices and chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

JUMP_ROWS = 4  # the most rows per request one step of the search adds


@dataclass(frozen=True)
class Request:
    """One request sharing the pass, as the allotment sees it."""

    id: int
    alpha: float | None  # its current proposal's measured acceptance; None: it keeps its own schedule (one row)
    copied: bool = False  # its proposal is copied from the context: no draft pass
    catch_up: float = 0.0  # seconds its draft spends catching up before its next guess (`adaptive.catch_up_cost`)


@dataclass(frozen=True)
class Prices:
    """What a round's parts cost, in seconds."""

    target: Callable[[float], float]  # T(rows): a target pass of that many rows
    draft: Callable[[float], float] | None  # T_d(rows): a draft step's pass; None: not timed yet, so a round is
    #                                         priced by its target pass alone (drafting looks free, and gets timed)
    target_gap: float = 0.0  # the time between a target pass and the pass before it
    draft_gap: float = 0.0  # the same before a draft pass


def rate(requests: Sequence[Request], prices: Prices, gamma: dict[int, int]) -> float:
    """Expected tokens per second of a round in which each request drafts gamma[id] (none: 0) and the others write
    their next token. The model's j-th pass carries a row of each guessing request's gamma >= j, the first also, with
    probability alpha^gamma, the last round's last draft (fed once that round kept every draft: as
    `AdaptiveGamma.drafting_time` prices it alone); a draft further behind first catches up, whole."""
    alphas = {r.id: r.alpha for r in requests if r.alpha is not None}
    rows = len(requests) + sum(gamma.values())
    expected = len(requests) + sum(alphas[i] ** j for i, g in gamma.items() for j in range(1, g + 1))
    if prices.draft is None:
        return expected / prices.target(rows)
    guesses = {r.id: gamma.get(r.id, 0) for r in requests if r.alpha is not None and not r.copied}  # (copies: none)
    drafting = sum(r.catch_up for r in requests if guesses.get(r.id))
    deepest, drafted = max(guesses.values(), default=0), 0
    for j in range(deepest, 0, -1):  # the j-th pass: a row of each request guessing j or more
        drafted += sum(g == j for g in guesses.values())
        lagging = sum(alphas[i] ** g for i, g in guesses.items() if g) if j == 1 else 0.0
        drafting += prices.draft(drafted + lagging) + prices.draft_gap
    return expected / (prices.target(rows) + prices.target_gap + drafting)


def allot(requests: Sequence[Request], prices: Prices, max_gamma: int) -> dict[int, int]:
    """gamma for each request with an alpha, {id: gamma}: the row budget spent where the round's expected tokens per
    second (`rate`) are highest (see the module docstring). Requests with their own schedule count as one row each."""
    gamma = {r.id: 0 for r in requests if r.alpha is not None}
    guessing = {r.id for r in requests if r.alpha is not None and not r.copied}  # (a copy runs no draft pass)
    while True:  # add the rows that raise the rate most, until none do
        now, best = rate(requests, prices, gamma), None
        open_ = [i for i in gamma if gamma[i] < max_gamma]
        longest = max((gamma[i] for i in open_ if i in guessing), default=None)
        # rows for one request; or a row each (or more) for the guessing requests at the longest gamma (or for every
        # guessing request), which share the draft passes that rows for one of them would pay for alone. Several rows
        # at once (up to JUMP_ROWS each): a first draft pass may not pay for one guess, yet for three
        groups = [[i] for i in open_] + [group for group in (
            [i for i in open_ if i in guessing and gamma[i] == longest], [i for i in open_ if i in guessing])
            if len(group) > 1]
        for group in groups:
            for steps in range(1, min(JUMP_ROWS, max_gamma - max(gamma[i] for i in group)) + 1):
                more = gamma | {i: gamma[i] + steps for i in group}
                if (added := rate(requests, prices, more)) > now:
                    now, best = added, more
        if best is None:
            return gamma
        gamma = best
