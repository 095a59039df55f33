"""Bench reports: predicted vs measured speed-ups, a Markdown table, and PNG plots, from a run's raw figures.

Prediction (the paper's formula with this machine's measured costs), for ours with a draft at gamma g:

    predicted = E[tokens](alpha, g) / (g c + T(g + 1) / T(1))       vs  measured = decode tok/s / plain decode tok/s

alpha and c are the run's own measured values; T(k) comes from the pass-cost profile. Decode tok/s leaves out the
prompt prefill, which both methods pay alike. With gamma "auto" the formula is summed over the run's rounds, each at
its own g; a round whose proposal was copied from the context (prompt lookup's) ran no draft pass, so it costs
T(g + 1) / T(1) alone, and its tokens are expected at the copies' own alpha.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from .. import analysis


def draft_label(draft: str) -> str:
    """A draft's name as the reports show it: a directory by its own name ("lookup+/x/smollm2-draft" ->
    "lookup+smollm2-draft")."""
    return "+".join(Path(part).name for part in draft.split("+"))


def _decode_rate(runs: list[dict], method: str, sampling: str) -> float | None:
    mine = [r for r in runs if r["method"] == method and r["sampling"] == sampling and r["stats"]]
    tokens = sum(r["new_tokens"] - r["stats"].get("prefill_rounds", 0) for r in mine)  # (the prefill's token apart)
    seconds = sum(r["stats"]["seconds"] - r["stats"]["prefill_seconds"] for r in mine)
    return tokens / seconds if seconds > 0 else None


def _verify_ratio(costs: dict, k: float) -> float:
    """T(k) / T(1) from the engine's measured pass costs (`analysis.measured_verify_cost`)."""
    return analysis.measured_verify_cost(costs["ratio"])(k)


def _decoding_rounds(stats: list[dict]) -> list[tuple[int, int, int]]:
    """(drafted, draft passes, accepted) of each decoding round of the runs (the prefill's round left out). Reports
    written before rounds recorded their draft passes count each drafted token as one pass."""
    rounds = []
    for s in stats:
        drafted, accepted = s["drafted_per_round"], s["accepted_per_round"]
        passes = s.get("passes_per_round") or drafted
        rounds += list(zip(drafted, passes, accepted, strict=True))[s.get("prefill_rounds", 0):]
    return rounds


def _alphas_by_kind(rounds: list[tuple[int, int, int]], alpha: float) -> dict[bool, float]:
    """{copied: alpha}: the acceptance rate of the proposals copied from the context (no draft pass) and of the
    model's guesses, each from its own rounds (a round is one rejection unless all its drafts were kept), when the
    run had both kinds; else the run's alpha for both."""
    kinds = {copied: [(g, a) for g, passes, a in rounds if g and (not passes) == copied] for copied in (False, True)}
    if not (kinds[False] and kinds[True]):
        return {False: alpha, True: alpha}
    return {copied: analysis.acceptance_rate(sum(a for _, a in mine), sum(a < g for g, a in mine)) or 0.0
            for copied, mine in kinds.items()}


def add_predictions(report: dict) -> dict:
    """Fill in, for every method: speed-up over transformers' generate; for ours with a draft, the measured decode
    speed-up over ours plain and the one predicted from its alpha, its c and the measured T(k) / T(1).

    Units: c is a draft forward pass over one plain decoding step (engine overhead included). The prediction sums
    over the run's rounds, sum_r E[tokens](alpha, g_r) / sum_r (g_r c + T(g_r + 1) / T(1)), so that gamma "auto",
    which varies g_r, is predicted as faithfully as a fixed gamma."""
    for m in report["methods"]:
        for key, name in (("speedup_vs_generate", "transformers generate"),
                          ("speedup_vs_llama_cpp", "llama.cpp plain"),
                          ("speedup_vs_llama_server", "llama-server plain")):
            base = next((x for x in report["methods"] if x["method"] == name and x["sampling"] == m["sampling"]), None)
            m[key] = m["tokens_per_second"] / base["tokens_per_second"] if base else None
        if m["family"] != "ours" or m["draft"] == "none":
            continue
        engine = m.get("engine") or report["engine"]
        costs = report["costs"].get(engine) or report["costs"][report["engine"]]
        plain_name = f"ours plain ({engine})"
        plain = _decode_rate(report["runs"], plain_name, m["sampling"])
        mine = _decode_rate(report["runs"], m["method"], m["sampling"])
        stats = [r["stats"] for r in report["runs"] if r["method"] == m["method"] and r["sampling"] == m["sampling"]]
        rounds = _decoding_rounds(stats)
        gammas = [g for g, _, _ in rounds]
        draft_calls = sum(s["draft_calls"] for s in stats)
        m["mean_gamma"] = sum(gammas) / len(gammas) if gammas else 0.0
        m["c"] = (sum(s["draft_seconds"] for s in stats) / draft_calls) * plain if draft_calls and plain else 0.0
        m["verify_ratio"] = _verify_ratio(costs, m["mean_gamma"] + 1)
        m["measured_speedup"] = mine / plain if mine and plain else None
        alpha = m["alpha"]
        if alpha is None or not gammas:
            continue
        alphas = _alphas_by_kind(rounds, alpha)
        m["copied_rounds"] = sum(1 for g, passes, _ in rounds if g and not passes)
        m["decoding_rounds"] = len(rounds)
        m["alpha_by_kind"] = {"copied": alphas[True], "guessed": alphas[False]}
        tokens = sum(analysis.expected_tokens(alphas[not passes], g) if g else 1.0 for g, passes, _ in rounds)
        drafting = sum(passes for _, passes, _ in rounds) * m["c"]
        m["predicted_speedup"] = tokens / (drafting + sum(_verify_ratio(costs, g + 1) for g in gammas))
        m["predicted_speedup_paper"] = tokens / (drafting + len(gammas))  # the verify pass taken as free
        m["predicted_best_gamma"] = analysis.best_gamma(alphas[False], m["c"], 12,
                                                        lambda k, c=costs: _verify_ratio(c, k))
    return report


def write(report: dict, out: Path, command: str) -> list[Path]:
    """report.json, report.md and the plots, under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    report = dict(report, command=command)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    plots = _plots(report, out)
    (out / "report.md").write_text(markdown(report, [p.name for p in plots]))
    return [out / "report.json", out / "report.md", *plots]


def fmt(x, fmt=".2f", suffix=""):
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:{fmt}}{suffix}"


def markdown(report: dict, plots: list[str]) -> str:
    mc = report["machine"]
    lines = [f"# Bench: {report['target']} ({report['plan']})", "",
             f"Command: `{report['command']}`  ",
             f"Commit {mc['commit']}, {mc['date']}; {mc.get('capability', mc['cpu'])}; "
             f"{mc['threads']} threads, dtype {mc['dtype']}, torch {mc['torch']}; read bandwidth "
             f"{mc['read_bandwidth_gb_s']:.1f} GB/s. {len(report['prompts'])} held-out prompts x "
             f"{report['max_new_tokens']} new tokens; methods alternate prompt by prompt. "
             f"Total {report['seconds'] / 60:.1f} min." +
             (f" llama-server: {mc['llama_server_build']}." if mc.get("llama_server_build") else ""),
             "", "## Cost of a target pass of k new tokens", "",
             "| engine | weights | " + " | ".join(f"k={k}" for k in next(iter(report["costs"].values()))["ms"]) +
             " | plain tok/s (1/T(1)) | bandwidth achieved |",
             "|---" * (len(next(iter(report["costs"].values()))["ms"]) + 4) + "|"]
    for name, c in report["costs"].items():
        cells = [f"{v:.1f} ms ({c['ratio'][k]:.2f}x)" for k, v in c["ms"].items()]
        lines.append(f"| {name} | {c.get('precision', '')} | " + " | ".join(cells) +
                     f" | {c['plain_tokens_per_second']:.1f} | "
                     f"{c['bandwidth_achieved_gb_s']:.1f} GB/s ({c['bandwidth_fraction']:.0%} of the machine's) |")
    if all("ms_before" in c for c in report["costs"].values()):
        bookends = [f"{name} T(1) {c['ms_before'][k]:.1f} ms before, {c['ms_after'][k]:.1f} after"
                    for name, c in report["costs"].items() for k in [next(iter(c["ms_before"]))]]
        if host := mc.get("host_gflops"):
            bookends.append(f"the host's compute rate (a float32 matmul in the caches) {host[0]:.0f} GFLOP/s before, "
                            f"{host[1]:.0f} after")
        lines += ["", "Each pass measured before the methods ran and again after (medians of 9), averaged: "
                  + "; ".join(bookends) + "."]
    for sampling in dict.fromkeys(m["sampling"] for m in report["methods"]):
        lines += ["", f"## Methods, {sampling}", "",
                  "| method | tokens/s | vs llama.cpp | vs llama-server | vs generate | tokens/call | alpha | "
                  "mean gamma | c | T(g+1)/T(1) | measured speed-up | predicted | predicted (paper, free verify) | "
                  "greedy identical |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for m in (m for m in report["methods"] if m["sampling"] == sampling):
            lines.append(
                f"| {m['method']} | {m['tokens_per_second']:.1f} | {fmt(m.get('speedup_vs_llama_cpp'), '.2f', 'x')} | "
                f"{fmt(m.get('speedup_vs_llama_server'), '.2f', 'x')} | "
                f"{fmt(m.get('speedup_vs_generate'), '.2f', 'x')} | "
                f"{fmt(m['tokens_per_target_call'])} | {fmt(m['alpha'])} | {fmt(m.get('mean_gamma'), '.1f')} | "
                f"{fmt(m.get('c'), '.3f')} | {fmt(m.get('verify_ratio'))} | "
                f"{fmt(m.get('measured_speedup'), '.2f', 'x')} | {fmt(m.get('predicted_speedup'), '.2f', 'x')} | "
                f"{fmt(m.get('predicted_speedup_paper'), '.2f', 'x')} | {m['identical'] or ''} |")
        lines += [f"\n{m['method']}: {m['copied_rounds']} of {m['decoding_rounds']} decoding rounds copied from the "
                  f"context (no draft pass), predicted at the copies' alpha {m['alpha_by_kind']['copied']:.2f} and "
                  f"the guesses' {m['alpha_by_kind']['guessed']:.2f}." for m in report["methods"]
                  if m["sampling"] == sampling and m.get("copied_rounds") and "alpha_by_kind" in m]
    for section in (llama_server_targets(report), llama_cpp_targets(report), targets(report)):
        lines += ["", *section] if section else []
    lines += ["", *[f"![{p}]({p})" for p in plots], ""]
    return "\n".join(lines)


def _alpha_needed(speedup: float, c: float, costs: dict) -> float | None:
    """The smallest alpha (to 0.01) whose best gamma reaches `speedup` over plain decoding with cost c and this
    engine's T(k) / T(1); None if no alpha below 1 does."""
    for alpha in (a / 100 for a in range(1, 100)):
        g = analysis.best_gamma(alpha, c, 12, lambda k: _verify_ratio(costs, k))
        if analysis.speedup(alpha, g, c, _verify_ratio(costs, g + 1)) >= speedup:
            return alpha
    return None


def _greedy_rate(runs: list[dict], method: str, prompt_ids: set[str]) -> float:
    """Tokens/s of a method's greedy runs over these prompts (total tokens / total seconds)."""
    mine = [r for r in runs if r["method"] == method and r["sampling"] == "greedy" and r["prompt_id"] in prompt_ids]
    return sum(r["new_tokens"] for r in mine) / sum(r["seconds"] for r in mine)


def default_method(report: dict, sampling: str = "greedy") -> dict | None:
    """Ours as `specdecode generate` runs by default: the default draft, gamma auto, on the engine auto picks."""
    default = draft_label(report.get("default_draft") or "")
    return next((m for m in report["methods"] if m["sampling"] == sampling and m["family"] == "ours"
                 and m["engine"] == report["engine"] and m["gamma"] == "auto" and draft_label(m["draft"]) == default),
                None)


def _prompt_rates(runs: list[dict], sampling: str) -> dict[tuple[str, str], float]:
    """Tokens/s of each method on each prompt: (method, prompt id) -> tokens / seconds over its runs."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in runs:
        if r["sampling"] == sampling:
            totals[r["method"], r["prompt_id"]][0] += r["new_tokens"]
            totals[r["method"], r["prompt_id"]][1] += r["seconds"]
    return {key: tokens / seconds for key, (tokens, seconds) in totals.items() if seconds > 0}


def _ratios(rates: dict[tuple[str, str], float], method: str, prompts: list[str],
            base: str = "llama-server plain") -> dict[str, float]:
    """A method's tokens/s over the base's on each prompt both ran: prompt id -> ratio."""
    return {p: rates[method, p] / rates[base, p] for p in prompts if (method, p) in rates and (base, p) in rates}


def verdict(met: bool) -> str:
    """A figure against its target, as the reports say it."""
    return "met" if met else "**not met**"


def llama_server_targets(report: dict) -> list[str]:
    """The real-pair issue's figures against `llama-server` on the same GGUF, greedy and sampled, as that issue
    states them: ratios per prompt of tokens/s in this run, then their median over prompts, the lowest prompt and
    each kind's median; against its own speculation, its best setting on each prompt."""
    kinds, lines = report.get("kinds", {}), []
    for sampling in dict.fromkeys(m["sampling"] for m in report["methods"]):
        rates, ours = _prompt_rates(report["runs"], sampling), default_method(report, sampling)
        plain = next((m for m in report["methods"] if m["sampling"] == sampling and m["family"] == "ours"
                      and m["engine"] == report["engine"] and m["draft"] == "none"), None)
        theirs = [m["method"] for m in report["methods"] if m["sampling"] == sampling
                  and m["engine"] == "llama-server" and m["draft"] != "none"]
        prompts = [p for p in kinds if ("llama-server plain", p) in rates]
        if ours is None or not prompts or any((ours["method"], p) not in rates for p in prompts):
            continue
        mine = _ratios(rates, ours["method"], prompts)
        median, lowest = statistics.median(mine.values()), min(mine, key=mine.get)
        by_kind = {kind: statistics.median(v for p, v in mine.items() if kinds[p] == kind)
                   for kind in dict.fromkeys(kinds[p] for p in prompts)}
        line = (f"- {sampling.capitalize()}: ours by default ({ours['method']}) **{median:.2f}x** llama-server plain, "
                f"median over {len(mine)} prompts (the issue's 1.5x: {verdict(median >= 1.5)}); lowest prompt "
                f"{mine[lowest]:.2f}x ({lowest}); each kind's median "
                + ", ".join(f"{k} {v:.2f}x" for k, v in by_kind.items())
                + f" (>= 1.0x on every kind: {verdict(min(by_kind.values()) >= 1.0)}).")
        if theirs:
            best = {p: rates[ours["method"], p] / max(rates[m, p] for m in theirs if (m, p) in rates)
                    for p in prompts if any((m, p) in rates for m in theirs)}
            line += (f" Against llama-server's own speculation (the best of its {len(theirs)} setting"
                     f"{'s' if len(theirs) > 1 else ''} here on each prompt): "
                     f"median {statistics.median(best.values()):.2f}x, lowest {min(best.values()):.2f}x (2x: "
                     f"{verdict(statistics.median(best.values()) >= 2.0)}).")
        if plain is not None and (own := _ratios(rates, plain["method"], prompts)):
            line += (f" Ours plain: median {statistics.median(own.values()):.2f}x (0.9x: "
                     f"{verdict(statistics.median(own.values()) >= 0.9)}).")
        if ours.get("identical"):
            line += f" Greedy text identical to ours plain on {ours['identical']} prompts."
        if ours.get("measured_speedup") and ours.get("predicted_speedup"):
            gap = ours["predicted_speedup"] / ours["measured_speedup"] - 1
            line += (f" Speed-up over ours plain measured {ours['measured_speedup']:.2f}x, predicted "
                     f"{ours['predicted_speedup']:.2f}x ({gap:+.0%}; within 15%: {verdict(abs(gap) <= 0.15)}).")
        lines.append(line)
    return ["## Against llama-server (the real-pair issue's figures)", "", *lines] if lines else []


def llama_cpp_targets(report: dict) -> list[str]:
    """The engine issue's figures against llama.cpp, per prompt kind and as the median over prompts."""
    greedy = {m["method"]: m for m in report["methods"] if m["sampling"] == "greedy"}
    base, lookup, ours = greedy.get("llama.cpp plain"), greedy.get("llama.cpp prompt lookup 10"), default_method(report)
    if not (base and ours):
        return []
    runs, kinds = report["runs"], report.get("kinds", {})
    ratios = sorted(_greedy_rate(runs, ours["method"], {p}) / _greedy_rate(runs, base["method"], {p}) for p in kinds)
    half = len(ratios) // 2
    median = ratios[half] if len(ratios) % 2 else (ratios[half - 1] + ratios[half]) / 2
    by_kind = {}
    for kind in dict.fromkeys(kinds.values()):
        ids = {p for p, k in kinds.items() if k == kind}
        by_kind[kind] = _greedy_rate(runs, ours["method"], ids) / _greedy_rate(runs, base["method"], ids)
    rate = ours["tokens_per_second"]
    lines = ["## Against llama.cpp (greedy)", "",
             f"- Ours as `specdecode generate` runs by default ({ours['method']}): {rate:.1f} tokens/s against "
             f"llama.cpp's own plain loop at {base['tokens_per_second']:.1f}: "
             f"{rate / base['tokens_per_second']:.2f}x overall, median over prompts {median:.2f}x (target 1.5x); "
             "by prompt kind " + ", ".join(f"{k} {v:.2f}x" for k, v in by_kind.items())
             + f" (target >= 1.0x on every kind; lowest {min(by_kind.values()):.2f}x)."]
    if lookup:
        lines.append(f"- Against llama.cpp's own prompt-lookup speculation (10 tokens, "
                     f"{lookup['tokens_per_second']:.1f} tokens/s): {rate / lookup['tokens_per_second']:.2f}x "
                     f"(target 1.5x). Its greedy text equalled ours plain on {lookup['identical'] or 'n/a'} prompts.")
    return lines


def targets(report: dict) -> list[str]:
    """The bench issue's figures, checked against this run, and what stands in the way of those not reached."""
    greedy = [m for m in report["methods"] if m["sampling"] == "greedy"]
    by_name = {m["method"]: m for m in greedy}
    generate, assisted = by_name.get("transformers generate"), by_name.get("transformers assisted")
    plain = by_name.get(f"ours plain ({report['engine']})")
    if plain is not None:  # the figures below speak of the engine the target ran on
        greedy = [m for m in greedy if m["family"] != "ours" or m["engine"] == report["engine"]]
    drafted = [m for m in greedy if m["family"] == "ours" and m["draft"] != "none"]
    if not (generate and assisted and plain and drafted):
        return []
    best = max(drafted, key=lambda m: m["tokens_per_second"])
    rate = best["tokens_per_second"]
    engine, spec = plain["tokens_per_second"] / generate["tokens_per_second"], rate / plain["tokens_per_second"]
    lines = ["## Targets (greedy)", "",
             f"- Best method: {best['method']}, {rate:.1f} tokens/s = {rate / assisted['tokens_per_second']:.2f}x "
             f"transformers assisted generation with the same draft (target 2x) and "
             f"{rate / generate['tokens_per_second']:.2f}x transformers `generate()` (target 3x). That is the "
             f"engine ({engine:.2f}x: ours plain over `generate()`) times speculation ({spec:.2f}x: over ours plain)."]
    costs = report["costs"][report["engine"]]
    for goal, name in ((3.0, "3x `generate()`"), (2.0 * assisted["tokens_per_second"] / generate["tokens_per_second"],
                                                  "2x assisted")):
        need = goal / engine
        if need <= spec:
            continue
        alpha = _alpha_needed(need, best.get("c") or 0.0, costs)
        lines.append(f"- {name} needs speculation worth {need:.2f}x over our plain decoding; with this draft's c = "
                     f"{best.get('c') or 0:.3f} and the measured T(k)/T(1) that takes alpha >= "
                     + (f"{alpha:.2f}" if alpha else "1 (out of reach)") + f" at the best gamma; it measured "
                     f"{best['alpha']:.2f}.")
    limit = report["machine"]["read_bandwidth_gb_s"] * 1e9 / costs["weight_bytes"]
    lines.append(f"- Plain decoding: ours {plain['tokens_per_second']:.1f} tokens/s (a bare 1-token pass: "
                 f"{costs['plain_tokens_per_second']:.1f}), against the {limit:.0f} that reading the "
                 f"{costs['weight_bytes'] / 1e6:.0f} MB of weights once per token at the measured bandwidth "
                 "would allow.")
    by_draft: dict[str, list[dict]] = {}
    for m in drafted:
        if isinstance(m["gamma"], int) and m.get("predicted_speedup") and m.get("measured_speedup"):
            by_draft.setdefault(m["draft"], []).append(m)
    for draft, ms in by_draft.items():
        top = max(ms, key=lambda m: m["measured_speedup"])
        error = top["predicted_speedup"] / top["measured_speedup"] - 1
        lines.append(f"- Predicted vs measured at the best of the fixed gammas run ({top['method']}): "
                     f"{top['predicted_speedup']:.2f}x vs {top['measured_speedup']:.2f}x, {error:+.0%} "
                     "(target within 15%); best gamma predicted "
                     f"{top.get('predicted_best_gamma')}, best measured {top['gamma']}.")
        auto = next((m for m in drafted if m["draft"] == draft and m["gamma"] == "auto"), None)
        if draft == "prompt-lookup":
            theirs = next((m for m in greedy if m["family"] == "transformers" and m["draft"] == draft), None)
        else:  # transformers has no n-gram table drafts; a draft model is theirs as `assistant_model`
            theirs = None if draft in ("bigram", "unigram") else assisted
        if auto:
            lines.append(f"- Adaptive gamma with that draft: {auto['tokens_per_second']:.1f} tokens/s, "
                         f"{auto['tokens_per_second'] / top['tokens_per_second']:.2f}x the best fixed gamma"
                         + (f" and {auto['tokens_per_second'] / theirs['tokens_per_second']:.2f}x transformers' own "
                            f"schedule on the same draft ({theirs['method']})." if theirs else "."))
    return lines


def _plots(report: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, path: Path) -> Path:
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    paths = []
    greedy = [m for m in report["methods"] if m["sampling"] == "greedy"]

    fig, ax = plt.subplots(figsize=(8, 0.35 * len(greedy) + 1.5))
    names = [m["method"] for m in greedy][::-1]
    ax.barh(names, [m["tokens_per_second"] for m in greedy][::-1],
            color=["#2b7bba" if m["family"] == "ours" else "#999999" for m in greedy][::-1])
    ax.set_xlabel("tokens/s (greedy, end to end)")
    ax.set_title(f"{report['target']}: tokens/s by method")
    paths.append(save(fig, out / "tokens_per_second.png"))

    fixed = {}
    for m in greedy:
        if m["family"] == "ours" and isinstance(m["gamma"], int) and m.get("measured_speedup"):
            fixed.setdefault(m["draft"], []).append(m)
    if fixed:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        for draft, ms in fixed.items():
            draft = draft_label(draft)
            ms.sort(key=lambda m: m["gamma"])
            gammas = [m["gamma"] for m in ms]
            line = ax.plot(gammas, [m["measured_speedup"] for m in ms], "o-", label=f"{draft}: measured")[0]
            ax.plot(gammas, [m.get("predicted_speedup") for m in ms], "s--", color=line.get_color(),
                    label=f"{draft}: predicted (measured T(k))")
            ax.plot(gammas, [m.get("predicted_speedup_paper") for m in ms], ":", color=line.get_color(),
                    label=f"{draft}: paper formula (free verify)")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("gamma")
        ax.set_ylabel("decode speed-up over plain")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.set_title("Speed-up vs gamma, predicted and measured (greedy)")
        paths.append(save(fig, out / "speedup_vs_gamma.png"))

    # Per draft, the greedy run with the largest fixed gamma: it tests the most positions.
    widest = {}
    for m in greedy:
        if m["family"] == "ours" and isinstance(m["gamma"], int) and m["gamma"] > widest.get(m["draft"], (0,))[0]:
            widest[m["draft"]] = (m["gamma"], m["method"])
    by_draft: dict[str, tuple[list[int], list[int]]] = {}  # method -> (accepted at, tested at), summed over prompts
    for r in report["runs"]:
        s = r["stats"]
        if s and s.get("tokens_drafted") and r["sampling"] == "greedy" and r["method"] in {
                name for _, name in widest.values()}:
            accepted, tested = by_draft.setdefault(r["method"], ([], []))
            for i, (a, t) in enumerate(zip(s["accepted_at"], s["tested_at"], strict=True)):
                if i == len(tested):
                    accepted.append(0)
                    tested.append(0)
                accepted[i] += a
                tested[i] += t
    if by_draft:
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, (accepted, tested) in by_draft.items():
            rates = [a / t if t >= 10 else float("nan") for a, t in zip(accepted, tested, strict=True)]
            ax.plot(range(1, len(rates) + 1), rates, "o-", label=name)
        ax.set_xlabel("draft position (positions tested fewer than 10 times left out)")
        ax.set_ylabel("P(accepted | reached)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
        ax.set_title("Acceptance by draft position (greedy, each draft at its largest fixed gamma)")
        paths.append(save(fig, out / "acceptance_by_position.png"))
    return paths
