"""The allotment's pricing on its own (`server.allot`): properties over random requests and costs. How the scheduler
feeds it its measurements is tests/test_scheduler.py's."""

from hypothesis import given, settings
from hypothesis import strategies as st

from specdecode.server.allot import Prices, Request, allot, rate

requests = st.lists(st.builds(Request, id=st.integers(0, 10_000),
                              alpha=st.one_of(st.none(), st.just(0.0), st.floats(0.01, 0.99)),
                              copied=st.booleans(),
                              catch_up=st.sampled_from([0.0, 0.001, 0.05, 0.3])),
                    min_size=1, max_size=6, unique_by=lambda r: r.id)


def line(first: float, slope: float):
    return lambda rows: first + slope * (rows - 1)


prices = st.builds(lambda t1, slope, d1, d_slope, gaps: Prices(line(t1, slope), line(d1, d_slope), *gaps),
                   st.floats(0.01, 0.1), st.floats(0.0, 0.02), st.floats(0.001, 0.05), st.floats(0.0, 0.01),
                   st.tuples(st.floats(0.0, 0.01), st.floats(0.0, 0.01)))


@settings(max_examples=300, deadline=None)
@given(requests, prices, st.sampled_from([1, 3, 10]))
def test_the_allotment_is_never_priced_below_plain_batching(shared, costs, max_gamma):
    """Every request with an acceptance gets 0..max_gamma rows, the others none, and the round chosen is priced at
    least as high as plain batching (each request's next token alone): the search only adds rows that raise it."""
    gamma = allot(shared, costs, max_gamma)
    assert set(gamma) == {r.id for r in shared if r.alpha is not None}
    assert all(0 <= g <= max_gamma for g in gamma.values())
    assert rate(shared, costs, gamma) >= rate(shared, costs, dict.fromkeys(gamma, 0))


@settings(max_examples=200, deadline=None)
@given(requests, st.floats(0.01, 0.1))
def test_untimed_drafting_on_a_flat_target_looks_free(shared, t1):
    """Before the draft is timed a round is priced by its target pass alone; where that pass costs the same for any
    rows, each request whose drafts are ever kept drafts all it may (and so times the draft)."""
    gamma = allot(shared, Prices(line(t1, 0.0), None), 5)
    assert all(gamma[r.id] == 5 for r in shared if r.alpha)


def test_a_copy_drafts_where_a_model_guess_would_cost_a_draft_pass_too_dear():
    """Two requests alike (alpha 0.9) on cheap target rows, a draft pass dearer than a target pass: the copy (prompt
    lookup's, no draft pass) gets rows, the model's guess none. A catch-up is charged whole: the same guess with a
    cheap draft gets rows, unless its draft has 0.3 s to catch up first."""
    flat = line(0.020, 0.0001)
    guess, copy_ = Request(1, 0.9), Request(2, 0.9, copied=True)
    gamma = allot([guess, copy_], Prices(flat, line(0.050, 0.0)), 10)
    assert gamma[1] == 0 < gamma[2]
    cheap = Prices(flat, line(0.002, 0.0))
    assert allot([guess, copy_], cheap, 10)[1] > 0
    assert allot([Request(1, 0.9, catch_up=0.3), copy_], cheap, 10)[1] == 0
