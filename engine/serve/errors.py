"""Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, with the status a
client acts on: 400 a bad field (named in `param`), 401, 403 a foreign web page or Host, 404 an unknown model or voice, 413, 415,
422 markup that cannot be read, 429 (with Retry-After), 503 while the server is stopping."""
from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
          404: "invalid_request_error", 408: "invalid_request_error",
          405: "invalid_request_error", 413: "invalid_request_error", 415: "invalid_request_error",
          422: "invalid_request_error",
          429: "rate_limit_exceeded", 500: "server_error", 503: "server_error", 504: "server_error"}


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    """The schema of every error (OpenAPI)."""
    error: ErrorDetail


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.headers = status, message, param, code, headers


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": _TYPES.get(status, "invalid_request_error"), "param": param,
                      "code": code}}


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(error_body(e.status, e.message, e.param, e.code), status_code=e.status, headers=e.headers)


async def api_error_handler(request: Request, e: ApiError) -> JSONResponse:
    return error_response(e)


async def http_error_handler(request: Request, e) -> JSONResponse:
    """Starlette's own (no such route, wrong method) in the same shape."""
    code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code)
    message = f"no route {request.method} {request.url.path}" if e.status_code in (404, 405) else str(e.detail)
    return JSONResponse(error_body(e.status_code, message, None, code), status_code=e.status_code,
                        headers=getattr(e, "headers", None))


def param_of(message: str) -> str | None:
    """The request field an engine ValueError is about (from its wording)."""
    lowered = message.lower()
    for word, param in (("speaker", "voice"), ("voice", "voice"), ("language", "language"),
                        ("instruction", "instructions"), ("temperature", "temperature"), ("top_k", "top_k"),
                        ("top_p", "top_p"), ("max_frames", "max_frames"), ("seed", "seed")):
        if word in lowered:
            return param
    return "input"
