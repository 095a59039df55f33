"""Training prompts for distillation, made offline and deterministically: templates of the six bench kinds (chat,
code writing, code editing, summarisation, questions, arithmetic) filled from word lists, and code and prose of the
Python standard library (on every machine). None of them is in the bench prompt set."""

from __future__ import annotations

import ast
import random
import sysconfig
import textwrap
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
    "unit testing", "recursion", "sorting algorithms", "hash functions", "web browsers", "email", "rainbows",
    "thunderstorms", "the seasons", "photosynthesis in algae", "evolution", "the periodic table", "atoms",
    "the speed of light", "sound waves", "the pyramids of Egypt", "the Great Wall of China",
    "the Industrial Revolution",
    "vitamins", "exercise", "nutrition", "time zones", "maps", "the compass", "steam engines", "electric cars",
    "solar panels", "wind turbines", "the ocean", "clouds", "snow", "trees", "mushrooms", "dinosaurs", "whales",
    "bats", "ants", "owls", "the human brain", "bones", "blood", "teeth", "libraries", "museums", "newspapers",
    "money", "banks", "taxes", "elections", "courts", "cities", "farming", "irrigation", "cheese making",
    "tea", "chocolate", "spices", "the violin", "painting", "photography", "cinema", "poetry", "novels",
    "the alphabet", "numbers", "zero", "calendars", "clocks", "satellites", "telescopes", "microscopes", "robots",
    "spreadsheets", "passwords", "cloud computing", "compilers", "the command line", "APIs", "JSON", "HTML",
]
TASKS = [
    "reverses a list", "checks whether a number is prime", "counts the vowels in a string",
    "returns the largest element of a list", "converts Celsius to Fahrenheit", "computes the factorial of n",
    "removes duplicates from a list while keeping the order", "returns the average of a list of numbers",
    "checks whether two strings are anagrams", "capitalizes the first letter of every word",
    "finds the second smallest number in a list", "counts the lines in a text file", "merges two dictionaries",
    "returns the n-th triangular number", "splits a list into chunks of size k",
    "computes the dot product of two lists", "checks whether a list is sorted",
    "returns the index of a value in a sorted list using binary search", "converts a binary string to an integer",
    "returns the most common element of a list", "validates an email address with a simple rule",
    "rotates a list by k positions", "returns all even numbers from a list", "computes the power set of a small list",
    "transposes a matrix given as a list of lists", "formats a number with thousands separators",
    "counts how many times each character appears in a string", "returns the longest word in a sentence",
    "checks whether a year is a leap year", "sums the digits of an integer", "returns the first n prime numbers",
    "converts a string to title case", "removes all whitespace from a string", "finds the intersection of two lists",
    "generates the multiplication table of n", "checks whether a string contains only digits",
    "returns the minimum and maximum of a list", "computes the median of a list", "reverses the words in a sentence",
    "converts minutes to hours and minutes", "checks whether a number is a perfect square",
    "returns a dictionary mapping words to their lengths", "flattens a dictionary of lists into one list",
    "reads a JSON file and returns its contents", "writes a list of strings to a text file, one per line",
    "computes the Fibonacci numbers up to n", "finds all pairs in a list that sum to a target",
]
LANGUAGES = ["Python"] * 6 + ["JavaScript", "Java", "C", "Go", "Rust", "TypeScript", "Bash"]
SQL = ["returns all users older than 30", "counts the orders of each customer",
       "finds the three most expensive products",
       "lists the employees hired in 2020", "computes the average salary per department",
       "finds customers who never placed an order", "returns the total sales per month",
       "deletes rows with a missing email", "updates the price of a product by 10 percent",
       "joins the orders and customers tables"]
THINGS = ["a lighthouse", "a lost key", "an old bicycle", "a talking parrot", "a snowy mountain village",
          "a robot gardener", "a library at midnight", "a time traveller", "a small bakery", "a summer storm",
          "a city at dawn", "a friendly dragon", "a chess tournament", "a spaceship engineer", "a river journey",
          "a lonely whale", "the first day of school", "a broken umbrella", "an autumn forest", "a night train",
          "a market in the morning", "a kite festival", "a tiny island", "a clockmaker", "a rainy Monday"]
ACTIVITIES = ["studying for exams", "saving money", "learning a new language", "running a first marathon",
              "writing clean code", "keeping a plant alive", "planning a trip", "cooking for a crowd",
              "starting a vegetable garden", "giving a presentation", "working in a team", "staying healthy",
              "sleeping better", "reading more books", "moving to a new city", "learning to draw",
              "preparing for a job interview", "keeping a tidy desk", "walking more every day", "drinking more water"]
FORMS = ["a haiku", "a short poem", "a limerick", "a two-paragraph story", "a short dialogue", "a product slogan",
         "a four-line rhyme", "a short fable", "a diary entry", "a postcard message", "a short speech"]
PEOPLE = ["a customer", "a teacher", "a neighbour", "a new colleague", "my manager", "a landlord", "a friend",
          "my team", "a client", "the school principal", "a hotel", "a shop owner"]
EMAILS = ["asking for a deadline extension", "thanking them for their help", "apologising for a late reply",
          "confirming a meeting time", "requesting a refund", "introducing myself", "inviting them to a party",
          "asking for feedback on a report", "announcing a schedule change", "declining an offer politely"]
EDITS = ["Add type hints to this function and return it", "Add a docstring to this function and return the whole "
         "function", "Add comments to this code and return it", "Rename the variables of this function to clearer "
         "names and return it", "Make this function easier to read and return it", "Add input validation to this "
         "function and return it", "Rewrite this function in a shorter way and return it", "Fix any bug you find "
         "in this function and return the corrected version", "Convert this function to use f-strings where it "
         "builds strings, and return it", "Repeat this code exactly, then explain it in one sentence"]
UNITS = [("kilometres", "metres", 1000), ("hours", "minutes", 60), ("kilograms", "grams", 1000),
         ("metres", "centimetres", 100), ("minutes", "seconds", 60), ("litres", "millilitres", 1000)]
NAMEABLE = ["a cafe", "a podcast", "a cat", "a band", "a bookshop", "a robot", "a sailing boat", "a garden"]
PERIODS = ["a week", "a month", "three days", "a weekend"]
CLASSES = ["Queue", "Counter", "BankAccount", "Timer", "Inventory", "Point", "Matrix", "Playlist", "Thermostat"]
NAMES = ["Sara", "Ken", "Lena", "Omar", "Mia", "Tom", "Ravi", "Ana", "Jonas", "Yuki", "Amara", "Pablo"]
ITEMS = ["apples", "books", "marbles", "tickets", "cookies", "stamps", "pencils", "eggs", "stickers", "coins"]


def _arith(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 12)
    item, name = rng.choice(ITEMS), rng.choice(NAMES)
    big, small, factor = rng.choice(UNITS)
    pct = rng.choice([5, 10, 12, 15, 20, 25, 30, 40, 50, 75])
    return rng.choice([
        f"What is {a} times {b}? Explain your steps.",
        f"What is {a * c} divided by {c}? Show your work.",
        f"What is {a} plus {b} minus {c}?",
        f"{name} has {a} {item} and buys {b} more, then gives away {c}. How many {item} are left? Explain.",
        f"A box holds {c} {item}. How many boxes are needed for {a * c + rng.randint(1, c - 1)} {item}?",
        f"What is {pct}% of {a * 10}? Explain how to compute it.",
        f"Solve for x: {c}x + {a} = {c * b + a}. Show each step.",
        f"A train travels {a * c} km in {c} hours. What is its average speed?",
        f"What is the perimeter of a rectangle that is {a} cm by {b} cm?",
        f"What is the area of a square with sides of {c} metres?",
        f"How many {small} are in {c} {big}?",
        f"{name} reads {c} pages a day. How many days does a {a * c}-page book take?",
        f"A shirt costs {a} dollars and is {pct}% off. What is the new price?",
        f"What is the average of {a}, {b} and {c}? Explain.",
        f"{name} is {c} years old and her brother is {a // 4 + 1} years older. How old is her brother?",
        f"If {c} friends share {a * c} {item} equally, how many does each get?",
        f"Which is larger, {c}/{c + 1} or {c + 1}/{c + 2}? Explain.",
    ])


def _stdlib(rng: random.Random, limit: int) -> tuple[list[str], list[str]]:
    """(small functions as source code, prose paragraphs) from the standard library's modules and documentation."""
    functions, prose = [], []
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    rng.shuffle(files)
    for path in files:
        if len(functions) >= limit:
            break
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and 3 <= node.end_lineno - node.lineno <= 14:
                segment = ast.get_source_segment(source, node) or ""
                functions.append(textwrap.dedent(" " * node.col_offset + segment))  # methods too, dedented
            doc = ast.get_docstring(node) if isinstance(node, ast.Module | ast.ClassDef) else None
            if doc and 150 <= len(doc) <= 900:
                prose.append(" ".join(doc.split()))
    try:
        from pydoc_data.topics import topics  # the language reference as prose, shipped with Python

        for text in topics.values():
            for paragraph in text.split("\n\n"):
                flat = " ".join(paragraph.split())
                if 200 <= len(flat) <= 800 and "::=" not in flat and ">>>" not in flat:
                    prose.append(flat)
    except ImportError:
        pass
    return [f for f in functions if f], prose


def training_prompts(n: int, seed: int = 0) -> list[str]:
    """n distinct prompts, spread evenly over the six kinds."""
    rng = random.Random(seed)
    functions, prose = _stdlib(rng, 600)
    kinds = {
        "chat": [
            lambda: f"Give me {rng.randint(3, 6)} tips for {rng.choice(ACTIVITIES)}.",
            lambda: f"Write {rng.choice(FORMS)} about {rng.choice(THINGS)}.",
            lambda: f"Write a short email to {rng.choice(PEOPLE)} {rng.choice(EMAILS)}.",
            lambda: f"Suggest {rng.randint(3, 5)} names for {rng.choice(NAMEABLE)}.",
            lambda: f"Make a simple plan for {rng.choice(ACTIVITIES)} over {rng.choice(PERIODS)}.",
            lambda: f"Describe {rng.choice(THINGS)} in {rng.randint(2, 4)} sentences.",
            lambda: f"Write a friendly message to {rng.choice(PEOPLE)} about {rng.choice(TOPICS)}.",
        ],
        "code_write": [
            lambda: f"Write a {rng.choice(LANGUAGES)} function that {rng.choice(TASKS)}.",
            lambda: f"Write a Python function that {rng.choice(TASKS)}, with a short docstring.",
            lambda: f"Write a SQL query that {rng.choice(SQL)}.",
            lambda: f"Write a Python class {rng.choice(CLASSES)} with a few useful methods.",
            lambda: f"Write unit tests with pytest for this function:\n\n{rng.choice(functions)}",
        ],
        "code_edit": [
            lambda: f"{rng.choice(EDITS)}:\n\n{rng.choice(functions)}",
        ],
        "summarize": [
            lambda: f"Summarize this text in one sentence:\n\n{rng.choice(prose)}",
            lambda: f"Summarize this text in two sentences:\n\n{rng.choice(prose)}",
            lambda: f"Summarize the following paragraph:\n\n{rng.choice(prose)}",
            lambda: f"Give the main point of this text:\n\n{rng.choice(prose)}",
            lambda: f"Summarize this for a beginner:\n\n{rng.choice(prose)}",
        ],
        "qa": [
            lambda: f"What is {rng.choice(TOPICS)}?",
            lambda: f"How does {rng.choice(TOPICS)} work?",
            lambda: f"Why is {rng.choice(TOPICS)} important?",
            lambda: f"Explain {rng.choice(TOPICS)} in simple terms.",
            lambda: f"What is the difference between {rng.choice(TOPICS)} and {rng.choice(TOPICS)}?",
            lambda: f"Give an example of {rng.choice(TOPICS)} in everyday life.",
            lambda: f"What are three facts about {rng.choice(TOPICS)}?",
            lambda: f"Explain what this function does:\n\n{rng.choice(functions)}",
        ],
        "math": [lambda: _arith(rng)],
    }
    names = list(kinds)
    prompts, seen = [], set()
    while len(prompts) < n:
        text = rng.choice(kinds[names[len(prompts) % len(names)]])()
        if text not in seen:
            seen.add(text)
            prompts.append(text)
    return prompts
