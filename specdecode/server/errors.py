"""Every error as OpenAI shapes it: a 4xx or 5xx with `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

log = logging.getLogger("specdecode.server")

TYPES = {400: "invalid_request_error", 404: "not_found_error", 405: "invalid_request_error", 408:
         "invalid_request_error", 413: "invalid_request_error", 503: "service_unavailable", 500: "server_error"}


class APIError(Exception):
    """A request the server refuses (status 4xx) or cannot serve (5xx), with a message for the client."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message, self.status, self.param, self.code = message, status, param, code


def error_body(message: str, status: int, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error" if status < 500 else
                                                            "server_error"), "param": param, "code": code}}


def error_response(message: str, status: int, param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, status, param, code), status_code=status)


# The names pydantic gives the members of a union in an error's location ("stop.str", "gamma.constrained-int",
# "messages.1.content.list[TextPart].0.type"): not part of the field's path as the client sent it.
_TYPE_TAGS = {"str", "int", "float", "bool", "none", "list", "dict"}


def _field_path(loc: tuple) -> str | None:
    """The field an error's location names, as the client wrote it: "messages.1.content", "stop"."""
    parts = [str(part) for part in loc if part not in ("body", "query") and (
        isinstance(part, int) or (str(part).isidentifier() and str(part).islower() and part not in _TYPE_TAGS))]
    return ".".join(parts) or None


def _validation_message(error: RequestValidationError, request: Request) -> tuple[str, str | None]:
    first = error.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query")]
    if first.get("type") == "json_invalid":
        return f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'parse error')})", None
    if not loc and tuple(first.get("loc", ())) == ("body",):
        sent = request.headers.get("content-type", "none")
        hint = "" if "json" in sent else f" sent as Content-Type: application/json (this one came as {sent})"
        return f"the request body must be a JSON object{hint}", None
    param, message = _field_path(first.get("loc", ())), first["msg"].removeprefix("Value error, ")
    return (f"{param}: {message}" if param else f"request body: {message}"), param


def install(app: FastAPI) -> None:
    """Route validation errors, HTTP errors, `APIError` and `ValueError` (bad input deep inside) to JSON bodies."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, error: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(error, request)
        return error_response(message, 400, param)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> JSONResponse:
        message = error.detail if isinstance(error.detail, str) else str(error.detail)
        if error.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        return error_response(message, error.status_code)

    @app.exception_handler(APIError)
    async def _api(request: Request, error: APIError) -> JSONResponse:
        return error_response(error.message, error.status, error.param, error.code)

    @app.exception_handler(ValueError)
    async def _value(request: Request, error: ValueError) -> JSONResponse:
        return error_response(str(error), 400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(f"internal error: {type(error).__name__}", 500)
