"""`specdecode serve`: the HTTP API and the explainer page, in this process, until Ctrl-C."""

from __future__ import annotations

import argparse
import copy
import sys

from ..drafts.model import check_confidence
from .options import add_model_options


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="serve an OpenAI-compatible API and an interactive explainer page over HTTP",
        description="Serve speculative decoding over HTTP: OpenAI-compatible /v1/completions and "
        "/v1/chat/completions (with a `speculative` object in each answer), and at / a page with the paper's "
        "figures driven by the project's own engine. The models load on the first request that needs them.",
        epilog="Examples: specdecode serve   |   specdecode serve --target toy --port 8001   |   curl "
        "localhost:8000/v1/completions -H 'Content-Type: application/json' -d '{\"prompt\": \"Hello\"}'",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    add_model_options(p, "default drafts per round: an integer >= 1, or 'auto' (default; requests may override)")
    p.add_argument("--max-tokens", type=int, default=2048, help="the most tokens one request may ask for (2048)")
    p.add_argument("--max-prompt-tokens", type=int, default=4096, help="the longest prompt accepted, in tokens")
    p.add_argument("--max-body-bytes", type=int, default=1_000_000,
                   help="the largest request body accepted, checked before parsing (1000000; larger: 413)")
    p.add_argument("--max-queue", type=int, default=16,
                   help="generating requests running or waiting their turn at once (16; one more: 503)")
    p.add_argument("--sequences", type=int, default=4,
                   help="requests generating at once, each target pass carrying all their rows (4; 1: one at a "
                   "time; engines that keep one cache always run one at a time)")
    p.add_argument("--request-timeout", type=float, default=300.0,
                   help="seconds a generating request may take, its wait included (300): past it a waiting request "
                   "gets a 503 and a running one answers with what it has")
    p.add_argument("--allowed-hosts", default=None,
                   help="comma-separated Host names answered, '*' for any (default: the loopback names when --host "
                   "is a loopback address, which stops DNS rebinding; otherwise any)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="server log level (info logs every request)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.gamma != "auto" and args.gamma < 1:
        raise ValueError(f"--gamma must be >= 1 or 'auto', got {args.gamma}")
    for name in ("max_tokens", "max_prompt_tokens", "max_body_bytes", "max_queue", "sequences"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.draft_confidence is not None:
        check_confidence(args.draft_confidence, "--draft-confidence")
    if not 0 < args.request_timeout < float("inf"):
        raise ValueError(f"--request-timeout must be a number of seconds > 0, got {args.request_timeout}")
    import uvicorn

    from ..server import create_app

    app = create_app(args.target, args.draft, args.dtype, args.engine, args.max_prompt_tokens, args.max_tokens,
                     args.gamma, args.max_body_bytes, args.max_queue, args.request_timeout,
                     allowed_hosts(args.host, args.allowed_hosts), args.sequences, args.draft_confidence)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, access_log=True,
                            log_config=_log_config(), timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"specdecode serve: http://{shown}:{args.port}/  (target {args.target}, loaded on first use; "
          "Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it caught, after its graceful shutdown
        pass
    except SystemExit:  # uvicorn's way of failing to start (the port is taken, ...), logged above
        raise ValueError(f"could not serve on {args.host}:{args.port} (see the log above)") from None
    print("specdecode serve: stopped", file=sys.stderr, flush=True)
    return 0


def allowed_hosts(host: str, flag: str | None) -> list[str] | None:
    """The Host names to answer (None: any) from --host and --allowed-hosts."""
    from ..server.guard import LOOPBACK_HOSTS, host_name

    if flag is None:
        return [*LOOPBACK_HOSTS, host] if host_name(host) in LOOPBACK_HOSTS else None
    names = [name.strip() for name in flag.split(",") if name.strip()]
    if not names:
        raise ValueError("--allowed-hosts needs at least one name (or '*' for any)")
    return None if "*" in names else names


def _log_config() -> dict:
    """uvicorn's logging, plus specdecode's own server log (model loading, one line per generation)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["specdecode"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config
