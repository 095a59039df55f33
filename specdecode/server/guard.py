"""What every request passes before the app sees it: the Host allowlist, then the body, read whole within a size and
a time limit.

    Host      not in the allowlist (when there is one)        400  (a page elsewhere cannot reach a local server
                                                                     through DNS rebinding)
    body      Content-Length or bytes received over the limit  413  (checked before anything is parsed)
    body      not all arrived within BODY_TIMEOUT seconds      408  (a client that stops halfway frees its slot)

The app then reads the body from memory, so no endpoint can be made to parse more than the limit.
"""

from __future__ import annotations

import anyio

from .errors import error_response

BODY_TIMEOUT = 30.0  # seconds for a request body to arrive
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def host_name(header: str) -> str:
    """The name of a Host header without its port, lower-cased: "[::1]:8000" -> "::1", "LocalHost:80" -> "localhost"."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware: allowed_hosts None answers any Host; max_body_bytes bounds every request body."""

    def __init__(self, app, max_body_bytes: int, allowed_hosts: list[str] | None = None,
                 body_timeout: float = BODY_TIMEOUT):
        self.app, self.max_body_bytes, self.body_timeout = app, max_body_bytes, body_timeout
        self.allowed_hosts = None if allowed_hosts is None else {host_name(h) for h in allowed_hosts}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers", ()))
        host = headers.get(b"host", b"").decode("latin-1")
        if self.allowed_hosts is not None and host_name(host) not in self.allowed_hosts:
            return await error_response(f"this server does not answer to the host {host!r} (serve --allowed-hosts "
                                        "says which names it answers to)", 400, code="host_not_allowed")(
                scope, receive, send)
        length = headers.get(b"content-length", b"0")
        if not length.isdigit():
            return await error_response("the Content-Length header is not a number", 400)(scope, receive, send)
        if int(length) > self.max_body_bytes:
            return await self._too_large(scope, receive, send)
        chunks, size = [], 0
        try:
            with anyio.fail_after(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # the client left before its body was in: nothing to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        return await self._too_large(scope, receive, send)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return await error_response(f"the request body did not arrive within {self.body_timeout:g} s", 408)(
                scope, receive, send)
        body, delivered = b"".join(chunks), False

        async def replay():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then the connection's own messages (a disconnect)

        await self.app(scope, replay, send)

    async def _too_large(self, scope, receive, send) -> None:
        await error_response(f"the request body is larger than this server takes ({self.max_body_bytes} bytes; "
                             "serve --max-body-bytes)", 413)(scope, receive, send)
