"""The prompt path (`NativeLlama.add_prompt_path`): a prompt's rows computed through twins of the int4-dot8 layers in
another format, every other row through int4-dot8 as it is. A row's path must follow its role, never the pass it
is in: the same bits alone, in chunks, beside other sequences, served by the scheduler; cells reused only by rows of
their own path; greedy speculative output still plain output. int8 twins run on every CPU; bf16-onednn's (the path
AMX-BF16 machines get) where the CPU has native bf16 matmuls."""

import pytest
import torch
from test_scheduler import GREEDY, SAMPLED, alone, together

from specdecode import SamplingConfig, generate, generate_plain
from specdecode.cpu import capability
from specdecode.drafts.model import ModelDraft
from specdecode.models.kernels import kernel_isa
from specdecode.models.native import PROMPT_LEAST, load_native
from specdecode.server.scheduler import Scheduler

pytestmark = pytest.mark.skipif(kernel_isa(capability()) is None, reason="int4-dot8 (the path twinned) needs AVX2")
TWINS = ["int8"] + (["bf16-onednn"] if capability().bf16_matmul else [])


def _with_path(smollm2_native, fmt: str):
    """The default model in int4-dot8 with a prompt path in fmt."""
    model = load_native(smollm2_native.source, "int4-dot8")
    model.add_prompt_path(fmt)
    return model


@pytest.fixture(scope="module", params=TWINS)
def pathed(request, smollm2_native):
    return _with_path(smollm2_native, request.param)


def ids(n: int, seed: int = 0) -> torch.Tensor:
    return (torch.arange(n) * (37 + seed) + 11 * seed) % 5000 + 100


def test_a_prompt_row_is_the_same_alone_in_chunks_and_beside_other_sequences(pathed):
    """Whole, or in the server's chunks (which end where the prompt path's pieces do) beside other sequences' rows,
    prompt rows of its own included."""
    model, other, chunk = pathed, pathed.sequence(1), pathed.prompt_chunk
    prompt, more = ids(2 * chunk + 7), torch.tensor([7, 8, 9])
    model.clear()
    whole = model.prefill(prompt)
    after = model.extend(more)
    model.clear()
    plain = model.extend(prompt, keep=1)  # every row on the int4-dot8 path
    assert not torch.equal(plain, whole)  # (so the prompt path did compute the rows above)
    model.clear()
    other.clear()
    other.prefill(ids(20, 1))
    for i, start in enumerate(range(0, 2 * chunk, chunk)):  # as the server cuts it, beside others
        beside = [(other, ids(3 + i, 2), None)] if i % 2 else [(other, ids(150, 3 + i), 1)]
        model.extend_batch([(model, prompt[start:start + chunk], 1), *beside], [chunk, 0 if i % 2 else 149])
    chunked = model.extend_batch([(model, prompt[2 * chunk:], 1)], [6])[0]
    assert torch.equal(chunked, whole)
    assert torch.equal(model.extend(more), after)



def test_prompt_rows_go_through_the_twins_in_pieces_fixed_by_their_cells(pathed, monkeypatch):
    """One product per matrix per piece (cells 0..chunk - 1, chunk..): the rows a product holds, and so their bits
    (oneDNN's change with the count), are the same however the prompt is cut into passes."""
    model, chunk = pathed, pathed.prompt_chunk
    seen = []
    qkv = type(model.prompt_layers[0].qkv)
    call = qkv.__call__
    monkeypatch.setattr(qkv, "__call__", lambda self, x: (seen.append(x.shape[0]) if self is first else None,
                                                           call(self, x))[1])
    first = model.prompt_layers[0].qkv
    prompt = ids(2 * chunk + 7)
    model.clear()
    model.prefill(prompt)
    assert seen == [chunk, chunk, 6]
    seen.clear()
    model.clear()
    model.extend_batch([(model, prompt[:chunk - 5], 1)], [chunk - 5])
    model.prefill(prompt[chunk - 5:])
    assert seen == [chunk - 5, 5, chunk, 6]  # (a cut inside a piece: what the server's chunks never make)
    seen.clear()
    model.clear()
    model.prefill(prompt[:PROMPT_LEAST])  # too few prompt rows for the path to pay: all on int4-dot8
    model.clear()
    model.prefill(prompt[:PROMPT_LEAST + 1])
    assert seen == [PROMPT_LEAST]


def test_cells_are_reused_only_by_rows_of_the_path_that_wrote_them(pathed):
    """A chat's next turn shares its start with the last prompt and answer: the prompt rows' cells are reused (the
    twins' in whole pieces only), the rest of the prompt, its last row and the answer (int4-dot8's as it is) are
    computed again, on the prompt path."""
    model, fresh = pathed, pathed.sequence(2)
    model.feature_layers = ()
    first = ids(pathed.prompt_chunk + 40)
    model.clear()
    model.prefill(first)
    answer = ids(6, 5)
    model.extend(answer)
    turn = torch.cat([first, answer, ids(9, 6)])
    before = model.reused_tokens
    model.rollback(0)
    logits = model.prefill(turn)
    assert model.reused_tokens - before == pathed.prompt_chunk
    fresh.clear()
    assert torch.equal(logits, fresh.prefill(turn))
    before = model.reused_tokens
    model.rollback(0)
    assert torch.equal(model.extend(turn, keep=1), (fresh.clear(), fresh.extend(turn, keep=1))[1])
    assert model.reused_tokens == before  # prompt-path cells are not int4-dot8 rows


def test_greedy_speculative_output_is_bitwise_plain_with_a_prompt_path(pathed, smollm2_native):
    model = pathed
    draft = ModelDraft(load_native(smollm2_native.source, "int4-dot8"))
    tok = smollm2_native.tokenizer
    for text in ("Write a Python function that reverses a string.", "def fibonacci(n):"):
        prompt = tok.encode(f"{text} Explain each step. " * 6)  # (32 prompt rows or more: see PROMPT_LEAST)
        assert model.prompt_rows(torch.tensor(prompt), 1) == len(prompt) - 1
        plain = generate_plain(model, prompt, max_new_tokens=16, sampling=SamplingConfig(0))
        spec = generate(model, draft, prompt, max_new_tokens=16, gamma=4, sampling=SamplingConfig(0))
        assert spec.new_tokens == plain.new_tokens


@pytest.mark.parametrize("clients", [2, 4])
def test_requests_served_together_get_what_they_get_alone_with_a_prompt_path(clients, pathed, smollm2_native):
    """Prompts longer than a chunk, so that served beside others they are prefilled a chunk (`prompt_chunk` rows,
    or the scheduler's own chunk) a pass; the draft has a prompt path of its own."""
    target, chunk = pathed, pathed.prompt_chunk
    draft_model = load_native(smollm2_native.source, "int4-dot8")
    draft_model.add_prompt_path(target.prompt_format)
    draft = ModelDraft(draft_model)
    scheduler = Scheduler(target, draft, sequences=4, grace=2.0)
    samplings = [(GREEDY, None), (GREEDY, 100), (SAMPLED, 200), (SAMPLED, 201)]
    requests = [(ids(chunk + 9 * i + 5, i).tolist(), *samplings[i]) for i in range(clients)]
    expected = [alone(target, draft, r, 10) for r in requests]
    assert together(scheduler, requests, 10) == expected
    assert any(len(p["rows"]) > 1 and max(n for _, n in p["rows"]) == chunk for p in scheduler.passes)


def test_long_lived_processes_get_twins_where_the_cpu_picks_them(smollm2_native, monkeypatch, capsys):
    """`add_prompt_paths`: where `linear.prompt_format` picks twins (AMX-BF16), long-lived processes get them and
    one-shot commands only with SPECDECODE_PROMPT_PATH=on; elsewhere no command gets one (int4-dot8 computes a
    prompt's rows as the others: no twin of a format is itself); off never; a bad setting is a one-line error."""
    from specdecode.cli import main
    from specdecode.load import Target, add_prompt_paths

    def fresh() -> Target:
        model = load_native(smollm2_native.source, "int4-dot8")
        return Target(model, smollm2_native.tokenizer, "native", "smollm2")

    target, draft = fresh(), ModelDraft(fresh().model)
    target.model.name, draft.model.name = "target", "draft"
    monkeypatch.delenv("SPECDECODE_PROMPT_PATH", raising=False)
    twins = capability().amx_bf16
    assert add_prompt_paths(target, draft, long_lived=False) == []
    assert add_prompt_paths(target, draft, long_lived=True) == (["target", "draft"] if twins else [])
    assert (target.model.prompt_layers is not None) == (draft.model.prompt_layers is not None) == twins
    assert target.model.prompt_format == draft.model.prompt_format == ("bf16-onednn" if twins else None)
    monkeypatch.setenv("SPECDECODE_PROMPT_PATH", "on")
    assert add_prompt_paths(target, draft, long_lived=False) == []  # (built already, or none to build)
    solo = fresh()
    solo.model.name = "solo"
    assert add_prompt_paths(solo, None, long_lived=False) == (["solo"] if twins else [])
    with pytest.raises(ValueError, match="another format"):
        fresh().model.add_prompt_path("int4-dot8")
    monkeypatch.setenv("SPECDECODE_PROMPT_PATH", "off")
    assert add_prompt_paths(fresh(), None, long_lived=True) == []
    monkeypatch.setenv("SPECDECODE_PROMPT_PATH", "sometimes")
    capsys.readouterr()  # (the builds' progress bars)
    assert main(["generate", "--target", "toy", "--max-new-tokens", "3", "hello"]) == 2
    err = capsys.readouterr().err
    assert "SPECDECODE_PROMPT_PATH" in err and len(err.strip().splitlines()) == 1

