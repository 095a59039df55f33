"""Training prompts for distillation, made offline and deterministically: templates filled from word lists, and code
and docstrings of the Python standard library (on every machine). None of them is in the bench prompt set."""

from __future__ import annotations

import ast
import random
import sysconfig
from pathlib import Path

TOPICS = [
    "photosynthesis", "the water cycle", "gravity", "black holes", "the immune system", "volcanoes", "earthquakes",
    "the French Revolution", "the printing press", "electricity", "magnets", "climate change", "recycling",
    "the internet", "machine learning", "databases", "encryption", "compound interest", "inflation",
    "supply and demand", "the solar system", "the moon's phases", "tides", "DNA", "vaccines", "sleep",
    "meditation", "the Roman Empire", "the Renaissance", "democracy", "the stock market", "renewable energy",
    "batteries", "airplanes", "bridges", "coffee", "bread baking", "chess", "jazz music", "the Olympic Games",
    "honey bees", "coral reefs", "rain forests", "deserts", "glaciers", "the human heart", "memory", "languages",
    "prime numbers", "probability", "fractions", "algorithms", "operating systems", "version control",
    "unit testing", "recursion", "sorting algorithms", "hash functions", "web browsers", "email",
]
TASKS = [
    "reverses a list", "checks whether a number is prime", "counts the vowels in a string",
    "returns the largest element of a list", "converts Celsius to Fahrenheit", "computes the factorial of n",
    "removes duplicates from a list while keeping the order", "returns the average of a list of numbers",
    "checks whether two strings are anagrams", "capitalizes the first letter of every word",
    "finds the second smallest number in a list", "counts the lines in a text file", "merges two dictionaries",
    "returns the n-th triangular number", "splits a list into chunks of size k",
    "computes the dot product of two lists",
    "checks whether a list is sorted", "returns the index of a value in a sorted list using binary search",
    "converts a binary string to an integer", "returns the most common element of a list",
    "validates an email address with a simple rule", "rotates a list by k positions",
    "returns all even numbers from a list", "computes the power set of a small list",
    "transposes a matrix given as a list of lists", "formats a number with thousands separators",
]
LANGUAGES = ["Python", "Python", "Python", "JavaScript", "Python", "Java", "C", "Python", "Go", "Rust"]
THINGS = ["a lighthouse", "a lost key", "an old bicycle", "a talking parrot", "a snowy mountain village",
          "a robot gardener", "a library at midnight", "a time traveller", "a small bakery", "a summer storm",
          "a city at dawn", "a friendly dragon", "a chess tournament", "a spaceship engineer", "a river journey"]
ACTIVITIES = ["studying for exams", "saving money", "learning a new language", "running a first marathon",
              "writing clean code", "keeping a plant alive", "planning a trip", "cooking for a crowd",
              "starting a vegetable garden", "giving a presentation", "working in a team", "staying healthy"]
FORMS = ["a haiku", "a short poem", "a limerick", "a two-paragraph story", "a short dialogue", "a product slogan"]
PEOPLE = ["a customer", "a teacher", "a neighbour", "a new colleague", "my manager", "a landlord", "a friend"]
EMAILS = ["asking for a deadline extension", "thanking them for their help", "apologising for a late reply",
          "confirming a meeting time", "requesting a refund", "introducing myself"]


def _arith(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 12)
    item = rng.choice(["apples", "books", "marbles", "tickets", "cookies", "stamps", "pencils"])
    name = rng.choice(["Sara", "Ken", "Lena", "Omar", "Mia", "Tom", "Ravi", "Ana"])
    return rng.choice([
        f"What is {a} times {b}? Explain your steps.",
        f"What is {a * c} divided by {c}? Show your work.",
        f"{name} has {a} {item} and buys {b} more, then gives away {c}. How many {item} are left? Explain.",
        f"A box holds {c} {item}. How many boxes are needed for {a * c + rng.randint(1, c - 1)} {item}?",
        f"What is {rng.choice([10, 20, 25, 30, 40, 50])}% of {a * 10}? Explain how to compute it.",
        f"Solve for x: {c}x + {a} = {c * b + a}. Show each step.",
        f"A train travels {a} km in {c} hours. What is its average speed?",
        f"What is the perimeter of a rectangle that is {a} cm by {b} cm?",
    ])


def _stdlib_snippets(rng: random.Random, limit: int) -> tuple[list[str], list[str]]:
    """(small functions as source code, module or class docstrings as prose) from the standard library."""
    functions, docs = [], []
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    rng.shuffle(files)
    for path in files:
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and 4 <= node.end_lineno - node.lineno <= 14:
                functions.append(ast.get_source_segment(source, node) or "")
            doc = ast.get_docstring(node) if isinstance(node, ast.Module | ast.ClassDef) else None
            if doc and 150 <= len(doc) <= 900 and "\n\n" not in doc.strip()[:80]:
                docs.append(" ".join(doc.split()))
        if len(functions) >= limit and len(docs) >= limit // 2:
            break
    return [f for f in functions if f], docs


def training_prompts(n: int, seed: int = 0) -> list[str]:
    """n distinct prompts of many kinds (chat, code, code editing, summaries, questions, arithmetic)."""
    rng = random.Random(seed)
    functions, docs = _stdlib_snippets(rng, n)
    makers = [
        lambda: f"Explain {rng.choice(TOPICS)} in simple terms.",
        lambda: f"What is {rng.choice(TOPICS)}? Answer in a few sentences.",
        lambda: f"Give me {rng.randint(3, 5)} tips for {rng.choice(ACTIVITIES)}.",
        lambda: f"Write {rng.choice(FORMS)} about {rng.choice(THINGS)}.",
        lambda: f"Write a short email to {rng.choice(PEOPLE)} {rng.choice(EMAILS)}.",
        lambda: f"Write a {rng.choice(LANGUAGES)} function that {rng.choice(TASKS)}.",
        lambda: f"Compare {rng.choice(TOPICS)} and {rng.choice(TOPICS)} in a short paragraph.",
        lambda: _arith(rng),
        lambda: f"Explain what this function does:\n\n{rng.choice(functions)}",
        lambda: f"Add comments to this code and return it:\n\n{rng.choice(functions)}",
        lambda: f"Rewrite this function with clearer variable names and return it:\n\n{rng.choice(functions)}",
        lambda: f"Summarize this text in two sentences:\n\n{rng.choice(docs)}",
        lambda: f"Summarize in one sentence:\n\n{rng.choice(docs)}",
        lambda: f"Why is {rng.choice(TOPICS)} important?",
    ]
    prompts, seen = [], set()
    while len(prompts) < n:
        text = rng.choice(makers)()
        if text not in seen:
            seen.add(text)
            prompts.append(text)
    return prompts
