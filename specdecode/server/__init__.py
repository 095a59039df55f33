"""`specdecode serve`: an OpenAI-compatible HTTP API over speculative decoding, and a page that explains it.

    app.py       the FastAPI app factory `create_app` and its routes
    schemas.py   request bodies (pydantic)
    service.py   the served models: loaded lazily, run one generation at a time, round by round
    openai.py    answers and server-sent event streams in OpenAI's shapes
    figures.py   the data behind the page's figures (toy round, 10,000 draws, gamma curves, live rounds)
    errors.py    every error as an OpenAI-style JSON body
    static/      the page: plain HTML, CSS and JavaScript, no external resources
"""

from .app import create_app

__all__ = ["create_app"]
