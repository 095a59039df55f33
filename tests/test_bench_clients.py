"""`specdecode bench --clients N` on the toy target: the load run over loopback reports its figures, checks every
answer under load against the same request served alone (a check that can fail), refuses a bad N in one line, and
is bounded in time against a server that never answers. About 15 s on 2 busy cores (two toy servers start)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from specdecode.bench import clients, clients_report
from specdecode.cli import main

PROMPTS = clients.bench_prompts("toy", 1)  # six toy texts


@pytest.fixture(scope="module")
def toy_server():
    served = clients.start_ours("toy", None, threads=1, clients=2, request_timeout=60, startup_seconds=120)
    try:
        clients.warm_up(served, PROMPTS[0], 4, timeout=60)
        yield served
    finally:
        served.stop()


def test_loads_at_2_and_1_clients(toy_server):
    loads = {(toy_server.name, n): clients.run_load(toy_server, PROMPTS, n, 6, request_timeout=60, progress=False)
             for n in (1, 2)}
    for load in loads.values():
        assert not load.capped and all(o.error is None for o in load.outcomes), [o.error for o in load.outcomes]
        assert sorted(o.prompt_id for o in load.outcomes) == sorted(p.id for p in PROMPTS)
        assert all(o.tokens == 6 and o.text and o.ttft is not None and o.per_token is not None for o in load.outcomes)
    assert {o.client for o in loads[(toy_server.name, 2)].outcomes} == {0, 1}
    [method] = clients.compare(loads, {toy_server.name: True}, 2)
    assert method["mismatches"] == 0 and method["compared"] == len(PROMPTS)
    for n in ("1", "2"):
        figures = method["loads"][n]
        assert figures["tokens"] == 6 * len(PROMPTS) and figures["tokens_per_second"] > 0
        for key in clients_report.LATENCIES:
            assert figures[key] is not None and figures[key] >= 0, key
        assert figures["ttft_p95_ms"] >= figures["ttft_p50_ms"]
        assert len(figures["per_client"]) == int(n)
    assert method["scaling"] == pytest.approx(method["loads"]["2"]["tokens_per_second"] /
                                              method["loads"]["1"]["tokens_per_second"])

    # The check can fail: an answer that differs from the one served alone is counted, and reported loudly.
    loaded = loads[(toy_server.name, 2)]
    reference = clients.texts(loads[(toy_server.name, 1)])
    changed = dict(reference, **{PROMPTS[2].id: reference[PROMPTS[2].id] + " cat"})
    assert clients.mismatches(loaded.outcomes, reference) == []
    assert clients.mismatches(loaded.outcomes, changed) == [PROMPTS[2].id]
    report = {"clients": 2, "methods": [dict(method, mismatches=1, mismatched=[PROMPTS[2].id])]}
    assert any(line.startswith("MISMATCH: ours: 1 of 6") for line in clients_report.warnings(report))


def test_cli_report(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--clients", "2", "--target", "toy", "--prompts-per-kind", "1", "--max-new-tokens", "5",
                 "--threads", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "llama-server: skipped (toy is not a GGUF target" in printed
    report = json.loads((out / "clients.json").read_text())
    assert report["clients"] == 2 and report["target"] == "toy" and len(report["prompts"]) == 6
    for key in ("cpu", "capability", "threads", "dtype"):
        assert key in report["machine"], key
    [ours] = report["methods"]
    assert ours["method"] == "ours" and ours["exact"] and ours["draft"] == "toy-bigram-draft"
    assert ours["mismatches"] == 0 and ours["compared"] == 6 and ours["scaling"] > 0
    assert set(ours["loads"]) == {"1", "2"}
    assert all(load["errors"] == 0 and load["tokens"] == 30 for load in ours["loads"].values())
    assert all(len(load["answers"]) == 6 for load in ours["loads"].values())
    markdown = (out / "clients.md").read_text()
    assert "## Load: 2 concurrent clients, toy" in markdown and "| ours | toy-bigram-draft | 2 |" in markdown
    # The host's compute rate beside each load, and said loudly where it moved (a check that can fail)
    assert all(len(load["host_gflops"]) == 2 and min(load["host_gflops"]) > 0 for load in ours["loads"].values())
    assert "host GFLOP/s before, after" in markdown and "Host compute: a float32 matmul" in markdown
    steady = {"machine": {"threads": 1}, "methods": [{"loads": {"1": {"host_gflops": [100, 110]}}}]}
    assert "moved" not in clients_report.host_line(steady)
    steady["methods"][0]["loads"]["2"] = {"host_gflops": [150, 140]}
    assert "It moved by 50%" in clients_report.host_line(steady)

    # The same requests in process, one at a time: the same answers as ours served alone (a check that can fail).
    inproc = report["in_process"]
    assert inproc["method"] == "ours in process" and inproc["draft"] == "toy-bigram-draft"
    assert inproc["load"]["errors"] == 0 and inproc["load"]["tokens"] == 30 and inproc["load"]["clients"] == 1
    assert inproc["mismatches"] == 0 and inproc["compared"] == 6 and inproc["served_over_in_process"] > 0
    assert "| ours in process | toy-bigram-draft |" in markdown and not clients_report.warnings(report)
    figures = clients_report.issue_figures(report)
    assert figures[0] == "### The batched-serving issue's figures" and figures[0] in markdown
    assert f"**{ours['scaling']:.2f}x** ours with 1 client" in figures[2] and "(none: met)" in figures[-2]
    report["in_process"] |= {"mismatches": 1, "mismatched": ["toy-3"]}
    assert "(none: **not met**)" in clients_report.issue_figures(report)[-2]
    assert clients_report.warnings(report) == ["MISMATCH: 1 of 6 answers of ours served alone differ from the same "
                                               "request run in process (toy-3)"]


@pytest.mark.parametrize("n", ["0", "-1"])
def test_bad_clients_is_one_line(n, capsys):
    assert main(["bench", "--clients", n, "--target", "toy"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"specdecode bench: error: --clients must be >= 1, got {n}"


@pytest.mark.parametrize("argv", [["--clients", "7", "--prompts-per-kind", "1"], ["--clients", "2", "--quick"],
                                  ["--clients", "2", "--request-timeout", "0"]])
def test_other_bad_runs_are_one_line(argv, capsys):
    assert main(["bench", "--target", "toy", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specdecode bench: error: ") and err.count("\n") == 1


def test_a_server_that_never_answers_is_bounded():
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        served = clients.Served("silent", f"http://127.0.0.1:{silent.getsockname()[1]}", lambda: None)
        start = time.monotonic()
        load = clients.run_load(served, PROMPTS[:4], 2, 4, request_timeout=0.5, progress=False)
        assert time.monotonic() - start < 5
        assert len(load.outcomes) == 4 and all("within 0.5 s" in o.error for o in load.outcomes)
        start = time.monotonic()
        capped = clients.run_load(served, PROMPTS[:4], 2, 4, request_timeout=30, cap=0.5, progress=False)
        assert time.monotonic() - start < 5 and capped.capped
        assert all(o.error.startswith("unfinished: the load's cap of 0.5 s") for o in capped.outcomes)
        assert clients.summarize(capped)["errors"] == 4


def test_a_server_that_fails_to_start_is_one_line():
    with pytest.raises(ValueError, match=r"^our server did not start \(exited with status 2\): .*--no-such-flag"):
        clients.start_ours("toy", None, threads=1, clients=1, request_timeout=10, serve_flags=["--no-such-flag"],
                           startup_seconds=60)
