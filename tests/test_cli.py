"""The `specdecode` command: the seed's numbers as printed, toy generation, and one-line errors with exit status 2."""

import json
import subprocess
import sys

import pytest

from specdecode.cli import main
from specdecode.toy import WORDS

TOY = ["generate", "--target", "toy"]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_prints_the_seed_numbers(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--alpha", "0.8", "--gamma", "5", "--c", "0.05",
                           "--p", "0.5,0.3,0.2", "--q", "0.6,0.2,0.2")
    assert code == 0
    for text in ("(0.833, 1, 1)", "rejection        0.1", "(0, 1, 0)", "(0.5, 0.3, 0.2)  (equals p)",
                 "sum min(p, q)              0.9", "alpha^(gamma+1) = 0.262", "target call  3.69",
                 "speed-up                2.95x"):
        assert text in out, text


def test_analyze_free_draft_and_bigram_numbers(capsys):
    _, out, _ = run_cli(capsys, "analyze", "--alpha", "0.8", "--gamma", "5", "--c", "0", "--c-hat", "0")
    assert "speed-up                3.69x" in out and "extra arithmetic                 1.63x" in out
    _, out, _ = run_cli(capsys, "analyze", "--alpha", "0.2", "--c", "0", "--max-gamma", "30")
    assert "best gamma (1..30)" in out and "(1.25x)" in out
    assert out.count("best") >= 2  # the table marks its best row too


def test_generate_on_the_toy_pair_prints_text_and_stats(capsys):
    code, out, _ = run_cli(capsys, "generate", "--target", "toy", "the cat", "--max-new-tokens", "30", "--seed", "1",
                           "--temperature", "1")
    assert code == 0
    text, stats = out.strip().splitlines()
    assert len(text.split()) == 30 and set(text.split()) <= set(WORDS)
    assert "30 new tokens, " in stats and "tokens per target call" in stats and "alpha" in stats


def test_a_draft_confidence_stops_the_toy_draft_short(capsys):
    code, out, _ = run_cli(capsys, *TOY, "the cat", "--max-new-tokens", "40", "--gamma", "4", "--temperature", "1",
                           "--seed", "3", "--draft-confidence", "0.5", "--json")
    stats = json.loads(out)
    assert code == 0 and 0 < stats["stopped_rounds"] < stats["rounds"]


def test_compare_times_plain_and_speculative_decoding_alike(capsys):
    """--compare: both sides warm, timed twice each in alternating order, counting the same new tokens."""
    code, out, _ = run_cli(capsys, "generate", "--target", "toy", "the cat", "--max-new-tokens", "20", "--compare",
                           "--json")
    report = json.loads(out)
    assert code == 0 and report["compare_runs"] == ["plain", "speculative", "speculative", "plain"]
    assert report["plain_new_tokens"] == report["speculative_new_tokens"] == 2 * 20
    assert report["identical_to_plain"] is True
    for side in ("plain", "speculative"):
        assert report[f"{side}_tokens_per_second"] == report[f"{side}_new_tokens"] / report[f"{side}_seconds"]
    assert report["speedup"] == report["speculative_tokens_per_second"] / report["plain_tokens_per_second"]



@pytest.mark.parametrize("argv, message", [
    (TOY + ["--gamma", "0", "the"], "gamma"),
    (TOY + ["--temperature", "-1", "the"], "temperature"),
    (TOY + ["--top-p", "1.5", "the"], "top_p"),
    (TOY + ["--top-k", "0", "the"], "top_k"),
    (TOY + ["--max-new-tokens", "-2", "the"], "max_new_tokens"),
    (TOY + [""], "empty"),
    (TOY + ["the zebra"], "unknown word"),
    (TOY + ["--gamma", "many", "the"], "integer >= 1 or 'auto'"),
    (TOY + ["--draft-confidence", "1.5", "the"], "--draft-confidence must be in [0, 1]"),
    (TOY + ["--draft", "prompt-lookup", "--draft-confidence", "0.5", "the"], "for draft models"),
    (["generate", "--target", "nowhere", "hi"], "cannot load model"),
    (["info", "--target", "nowhere", "--no-measure"], "cannot load model"),
    (["info", "--target", "nowhere.gguf", "--no-measure"], "does not exist"),
    (["analyze", "--alpha", "1.5"], "alpha"),
    (["analyze", "--p", "0.5,0.6", "--q", "0.5,0.5"], "sum to 1"),
    (["analyze", "--p", "0.5,0.5"], "both --p and --q"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_status_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    out, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_the_installed_command_runs():
    done = subprocess.run([sys.executable, "-m", "specdecode", "analyze", "--gamma", "x"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    done = subprocess.run([sys.executable, "-m", "specdecode", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "generate" in done.stdout and "analyze" in done.stdout


def test_a_reader_that_goes_away_ends_generation_quietly():
    """`specdecode generate ... | head`: the reader closes the pipe mid-stream; the command stops with the shell's
    status for a closed pipe (141) and no traceback."""
    process = subprocess.Popen([sys.executable, "-m", "specdecode", "generate", "--target", "toy", "the cat",
                                "--max-new-tokens", "30000", "--seed", "1"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert len(process.stdout.read(10)) == 10  # (30,000 words outrun the pipe's buffer: the writer waits on us)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(60) == 141 and "Traceback" not in err and "Error" not in err, err


def test_draft_and_engine_help_come_from_the_loaders_table(capsys, monkeypatch):
    """One table (load.DRAFTS, load.ENGINE_TABLE, load.DEFAULT_DRAFTS) names what --help lists."""
    from specdecode.load import DEFAULT_DRAFTS, DRAFTS, ENGINE_TABLE, parse_draft

    monkeypatch.setenv("COLUMNS", "10000")  # no line breaks inside the help texts
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    out = capsys.readouterr().out
    assert all(f"{d.usage} ({d.help})" in out for d in DRAFTS)
    assert all(e.help in out for e in ENGINE_TABLE)
    assert all(draft in out for draft in DEFAULT_DRAFTS.values())
    assert parse_draft("lookup+bigram:/a:b") == (True, "bigram", "/a:b")
    assert parse_draft("eagle") == (False, "eagle", None)
    assert parse_draft("./my:draft") == (False, "./my:draft", None)  # only a draft that takes a file splits
