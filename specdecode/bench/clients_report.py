"""The report of `specdecode bench --clients N` (`clients.run_clients`' figures): clients.json, and clients.md with
the load table (tokens/s, latencies, answers differing from alone, the host's compute rate), the per-client table,
the server beside the library, the batched-serving issue's figures, and the warnings that must not be missed."""

from __future__ import annotations

import json
from pathlib import Path

from .report import fmt, verdict

LATENCIES = ("ttft_p50_ms", "ttft_p95_ms", "per_token_p50_ms", "per_token_p95_ms", "chunk_gap_p50_ms",
             "chunk_gap_p95_ms")


def _latency_cells(figures: dict, keys: tuple[str, ...]) -> str:
    """Milliseconds, to 3 figures or so, as table cells."""
    return " | ".join("" if figures[k] is None else f"{figures[k]:.0f}" if figures[k] >= 100 else f"{figures[k]:.1f}"
                      for k in keys)


def warnings(report: dict) -> list[str]:
    """Lines that must not be missed: answers of ours served alone that differ from the library's in process, answers
    under load that differ from the same request alone (ours claims none), and requests that failed."""
    lines = []
    if (inproc := report.get("in_process")) and inproc["mismatches"]:
        lines.append(f"MISMATCH: {inproc['mismatches']} of {inproc['compared']} answers of ours served alone differ "
                     f"from the same request run in process ({', '.join(inproc['mismatched'][:8])})")
    for m in report["methods"]:
        if m["mismatches"] and m["exact"]:
            lines.append(f"MISMATCH: {m['method']}: {m['mismatches']} of {m['compared']} answers under "
                         f"{report['clients']} clients differ from the same request served alone "
                         f"({', '.join(m['mismatched'][:8])})")
        for count, load in m["loads"].items():
            if load["errors"]:
                lines.append(f"ERRORS: {m['method']}, {count} client(s): {load['errors']} of {load['requests']} "
                             f"requests failed ({'; '.join(load['error_examples'])})")
    return lines


def host_line(report: dict, moved: float = 1.2) -> str | None:
    """What the host's compute rate did over the run (`probed`), or None where it was not measured; loudly where it
    moved by more than `moved` (max / min)."""
    rates = [g for m in report["methods"] for load in m["loads"].values() for g in load.get("host_gflops") or ()]
    if not rates:
        return None
    line = (f"Host compute: a float32 matmul in the caches on {report['machine']['threads']} threads, measured just "
            f"before and after each load: {min(rates):.0f}-{max(rates):.0f} GFLOP/s over the run.")
    if max(rates) > moved * min(rates):
        line += (f" **It moved by {max(rates) / min(rates) - 1:.0%}: loads whose passes carry several rows "
                 "(compute-bound) differ by the host as well as by the servers where their rates differ.**")
    return line


def issue_figures(report: dict) -> list[str]:
    """The batched-serving issue's figures, as this run measured them (ours at N clients against ours at 1, against
    llama-server plain at N, and against the library alone; exactness; per-token p95), each said met or not."""
    ours = next((m for m in report["methods"] if m["method"] == "ours"), None)
    n = str(report["clients"])
    if ours is None or n == "1" or n not in ours["loads"]:
        return []
    one, many = ours["loads"]["1"], ours["loads"][n]
    base = next((m for m in report["methods"] if m["method"] == "llama-server plain"), None)
    lines = [f"- {n} clients: {many['tokens_per_second']:.1f} tokens/s, **{ours['scaling']:.2f}x** ours with 1 client "
             f"(the issue's 2.5x: {verdict(ours['scaling'] >= 2.5)})."]
    if base is not None:
        ratio = many["tokens_per_second"] / base["loads"][n]["tokens_per_second"]
        lines.append(f"- Against llama-server plain with {n} clients: **{ratio:.2f}x** (1.3x: "
                     f"{verdict(ratio >= 1.3)}).")
    if (inproc := report.get("in_process")) and inproc["served_over_in_process"]:
        ratio = inproc["served_over_in_process"]
        lines.append(f"- 1 client: **{ratio:.3f}x** the library's single-request speculative decoding (within 5%: "
                     f"{verdict(ratio >= 0.95)}).")
    differ = ours["mismatches"] + (inproc["mismatches"] if inproc else 0)
    alone = f"; served alone differing from the library: {inproc['mismatches']} of {inproc['compared']}" if inproc \
        else ""
    lines.append(f"- Answers under load differing from the same request alone: {ours['mismatches']} of "
                 f"{ours['compared']}{alone} (none: {verdict(differ == 0)}).")
    if one["per_token_p95_ms"] and many["per_token_p95_ms"]:
        ratio = many["per_token_p95_ms"] / one["per_token_p95_ms"]
        lines.append(f"- Per-token p95 with {n} clients: {many['per_token_p95_ms']:.0f} ms, **{ratio:.2f}x** 1 "
                     f"client's {one['per_token_p95_ms']:.0f} ms (at most 2x: {verdict(ratio <= 2.0)}).")
    return ["### The batched-serving issue's figures", "", *lines]


def markdown(report: dict) -> str:
    """The --clients section of the bench report."""
    mc, n = report["machine"], report["clients"]
    base = next((m for m in report["methods"] if m["method"] == "llama-server plain"), None)
    lines = [f"## Load: {n} concurrent clients, {report['target']}", "",
             f"Command: `{report.get('command', '')}`  ",
             f"Commit {mc['commit']}, {mc['date']}; {mc['capability']}; {mc['threads']} threads, dtype {mc['dtype']}. "
             + (f"llama-server: {mc['llama_server_build']}. " if mc.get("llama_server_build") else "") +
             f"{len(report['prompts'])} {'toy' if report['target'] == 'toy' else 'held-out'} prompts x "
             f"{report['max_new_tokens']} new tokens, streamed over "
             f"loopback (POST {report['endpoint']}, temperature 0, seed {report['seed']}); each client sends its "
             "share one request after another; the same prompts with 1 client (servers in turn) and then with "
             f"{n} (in the reverse order). Tokens/s = completion tokens / the load's wall time. Per-token latency: "
             "each token counts its request's (last chunk - first chunk) / (tokens - 1); chunk gap: between chunks "
             "with text (ours sends one per round, llama-server one per token). Latencies in ms.", ""]
    if report.get("llama_server_skipped"):
        lines += [f"llama-server: skipped ({report['llama_server_skipped']}).", ""]
    counted = {m["method"]: m["loads"]["1"]["prompt_tokens"] for m in report["methods"]}
    if len(set(counted.values())) > 1:
        lines += ["Prompt tokens of the 1-client load as each server counted them (the same messages, templated "
                  "and tokenised by each): " + ", ".join(f"{name} {n}" for name, n in counted.items()) + ".", ""]
    lines += ["| method | draft | clients | tokens/s | vs 1 client | vs llama-server plain | TTFT p50 | TTFT p95 | "
              "per-token p50 | per-token p95 | chunk gap p50 | chunk gap p95 | tokens/target call | errors | "
              "answers differing from alone | host GFLOP/s before, after |", "|---" * 16 + "|"]
    for m in report["methods"]:
        for count, load in m["loads"].items():
            theirs = base["loads"][count]["tokens_per_second"] if base else None
            differ = "" if count == "1" else f"{m['mismatches']} of {m['compared']}" + \
                ("" if m["exact"] else " (not claimed)")
            lines.append(f"| {m['method']} | {m.get('draft') or ''} | {count} | {load['tokens_per_second']:.1f} | "
                         f"{fmt(m['scaling'], '.2f', 'x') if count != '1' else ''} | "
                         f"{fmt(load['tokens_per_second'] / theirs, '.2f', 'x') if theirs else ''} | "
                         f"{_latency_cells(load, LATENCIES)} | {fmt(load['tokens_per_target_call'])} | "
                         f"{load['errors']} of {load['requests']}{' (capped)' if load['capped'] else ''} | {differ} | "
                         f"{', '.join(f'{g:.0f}' for g in load.get('host_gflops') or ())} |")
    if host := host_line(report):
        lines += ["", host]
    lines += ["", f"### Per client ({n} clients)", "",
              "| method | client | requests | tokens | tokens/s while busy | TTFT p50 | TTFT p95 | per-token p50 | "
              "per-token p95 | errors |", "|---" * 10 + "|"]
    for m in report["methods"]:
        for c in m["loads"][str(n)]["per_client"]:
            rate = "" if c["tokens_per_second"] is None else f"{c['tokens_per_second']:.1f}"
            lines.append(f"| {m['method']} | {c['client']} | {c['requests']} | {c['tokens']} | {rate} | "
                         f"{_latency_cells(c, LATENCIES[:4])} | {c['errors']} |")
    if inproc := report.get("in_process"):
        load, ours = inproc["load"], report["methods"][0]["loads"]["1"]
        theirs = base["loads"]["1"]["tokens_per_second"] if base else None
        lines += ["", "### One client: the server beside the library", "",
                  "The same requests run in this process by the library, one at a time (no server, no scheduler: "
                  "single-request speculative decoding), alternating prompt by prompt with the 1-client load of "
                  f"{report['methods'][0]['method']} above.", "",
                  "| method | draft | tokens/s | ours served over it | vs llama-server plain | TTFT p50 | TTFT p95 | "
                  "per-token p50 | per-token p95 | tokens/target call | errors | answers differing from ours served |",
                  "|---" * 12 + "|",
                  f"| {inproc['method']} | {inproc['draft']} | {load['tokens_per_second']:.1f} | "
                  f"{fmt(inproc['served_over_in_process'], '.3f', 'x')} | "
                  f"{fmt(load['tokens_per_second'] / theirs, '.2f', 'x') if theirs else ''} | "
                  f"{_latency_cells(load, LATENCIES[:4])} | {fmt(load['tokens_per_target_call'])} | "
                  f"{load['errors']} of {load['requests']} | {inproc['mismatches']} of {inproc['compared']} |",
                  "", f"Ours served, 1 client: {ours['tokens_per_second']:.1f} tokens/s."]
    if figures := issue_figures(report):
        lines += ["", *figures]
    if warned := warnings(report):
        lines += ["", *[f"**{line}**" for line in warned]]
    return "\n".join(lines) + "\n"


def write(report: dict, out: Path) -> list[Path]:
    """clients.json and clients.md under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "clients.json").write_text(json.dumps(report, indent=1))
    (out / "clients.md").write_text(markdown(report))
    return [out / "clients.json", out / "clients.md"]
