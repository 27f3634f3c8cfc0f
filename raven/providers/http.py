"""Building the HTTP client for a model and posting a streaming request with retries.

Translates every `httpx` failure into a `ProviderError` here, at the edge; never
puts an API key in a message.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from raven.config import ModelSpec
from raven.providers.base import (
    ContextTooLong,
    ProviderAuthError,
    ProviderError,
    ProviderNotFoundError,
    ProviderProtocolError,
)
from raven.providers.sse import SSEEvent, iter_sse

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
MAX_RETRIES = 3
BACKOFF_BASE_S = 0.5
MAX_RETRY_DELAY_S = 60.0
_RETRYABLE_STATUS = frozenset({408, 429, 502, 503, 504, 529})
"""Statuses worth another try; 529 is Anthropic's "overloaded". A 500 is not retried:
local servers (llama.cpp) answer 500 for requests they will never accept."""
MAX_DETAIL_CHARS = 300
_warned_key_envs: set[str] = set()


@dataclass(frozen=True)
class Endpoint:
    """Where a model lives and how to name it in an error."""

    model: str
    base_url: str
    secret: str | None = None

    def label(self) -> str:
        return f"model {self.model!r} at {self.base_url}"

    def scrub(self, text: str) -> str:
        return text.replace(self.secret, "***") if self.secret else text


class HttpProvider:
    """What the HTTP model adapters share: the key, the endpoint and the client."""

    default_base_url: ClassVar[str]
    default_key_env: ClassVar[str]

    def __init__(self, spec: ModelSpec, read_timeout_s: float) -> None:
        base_url = spec.base_url or self.default_base_url
        key = self._key(spec)
        self.model_id = spec.id
        self.context_window = spec.context_window
        self._spec = spec
        self._endpoint = Endpoint(model=spec.vendor_model, base_url=base_url, secret=key or None)
        self._client = make_client(base_url, self.headers(key), read_timeout_s)

    def _key(self, spec: ModelSpec) -> str:
        """The API key: `apiKey` ("none" for none), else `apiKeyEnv`, else the vendor's
        variable, but only for the vendor's own API (no `baseUrl`): a key never goes to a
        server it was not named for."""
        if spec.api_key:
            return "" if spec.api_key.lower() == "none" else spec.api_key
        env_name = spec.api_key_env or (None if spec.base_url else self.default_key_env)
        if env_name is None:
            return ""
        key = os.environ.get(env_name, "")
        if not key and spec.api_key_env and env_name not in _warned_key_envs:
            _warned_key_envs.add(env_name)
            log.warning(
                "model %r: apiKeyEnv names %s, which is not set; sending no key "
                '(for a server that needs none, set "apiKey": "none" or drop apiKeyEnv)',
                spec.id,
                env_name,
            )
        return key

    def headers(self, key: str) -> dict[str, str]:
        """The vendor's authentication (and version) headers for `key`."""
        raise NotImplementedError

    async def aclose(self) -> None:
        await self._client.aclose()


def make_client(base_url: str, headers: dict[str, str], read_timeout_s: float) -> httpx.AsyncClient:
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=read_timeout_s, write=30.0, pool=10.0)
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/") + "/",
        headers=headers,
        timeout=timeout,
        follow_redirects=False,
    )


async def post_sse(
    client: httpx.AsyncClient,
    path: str,
    body: dict[str, Any],
    endpoint: Endpoint,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[SSEEvent]:
    """POST `body` and yield its SSE events, retrying 429/5xx/connect failures before any data."""
    for attempt in range(MAX_RETRIES + 1):
        last_try = attempt == MAX_RETRIES
        try:
            async with client.stream("POST", path, json=body) as response:
                if response.status_code in _RETRYABLE_STATUS and not last_try:
                    await response.aread()
                    delay = _retry_delay(response, attempt)
                    log.info(  # the log's; the person gets the outcome, once
                        "%s: HTTP %s, retrying in %.1fs",
                        endpoint.label(),
                        response.status_code,
                        delay,
                    )
                    await sleep(delay)
                    continue
                if response.status_code >= 400:
                    await response.aread()
                    raise _status_error(response, endpoint)
                async for event in iter_sse(response.aiter_lines()):
                    yield event
                return
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            if last_try:
                raise ProviderError(f"{endpoint.label()}: cannot connect ({exc})") from exc
            delay = BACKOFF_BASE_S * 2**attempt
            log.info("%s: connect failed, retrying in %.1fs", endpoint.label(), delay)
            await sleep(delay)
        except httpx.ReadTimeout as exc:
            raise ProviderProtocolError(
                f"{endpoint.label()}: no data for {client.timeout.read:.0f}s; gave up"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise ProviderProtocolError(
                f"{endpoint.label()}: the connection closed mid-stream"
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"{endpoint.label()}: {type(exc).__name__}") from exc


def decode_json(data: str, endpoint: Endpoint) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ProviderProtocolError(
            f"{endpoint.label()}: the stream sent something that is not JSON: {data[:80]!r}"
        ) from exc
    if not isinstance(value, dict):
        raise ProviderProtocolError(f"{endpoint.label()}: unexpected stream data {data[:80]!r}")
    return value


def _retry_delay(response: httpx.Response, attempt: int) -> float:
    header = response.headers.get("retry-after")
    if header:
        try:
            return min(max(float(header), 0.0), MAX_RETRY_DELAY_S)
        except ValueError:
            parsed = email.utils.parsedate_tz(header)
            if parsed:
                wait = email.utils.mktime_tz(parsed) - time.time()
                return min(max(wait, 0.0), MAX_RETRY_DELAY_S)
    return BACKOFF_BASE_S * 2**attempt


def _status_error(response: httpx.Response, endpoint: Endpoint) -> ProviderError:
    status = response.status_code
    if status in (401, 403):
        return ProviderAuthError(
            f"{endpoint.label()}: the API key was refused (HTTP {status}); "
            "check the model's apiKeyEnv or apiKey"
        )
    if status == 404:
        return ProviderNotFoundError(
            f"{endpoint.label()}: not found (HTTP 404); check the model name and baseUrl"
        )
    detail = endpoint.scrub(_error_detail(response))
    where = f"HTTP {status} from {endpoint.label()}"
    said = f"{detail} ({where})" if detail else where
    if status in (400, 413) and (window := context_window_in(response)) is not None:
        return ContextTooLong(said, window or None)
    return ProviderError(said)


_WINDOW_SAID = (
    re.compile(r"maximum context length is (\d+) tokens"),  # OpenAI
    re.compile(r"prompt is too long: \d+ tokens > (\d+) maximum"),  # Anthropic
    re.compile(r"context (?:length|size|window)[^0-9]{0,40}(\d{3,})"),  # others, worded so
)


def context_window_in(response: httpx.Response) -> int | None:
    """For a refusal because the request passed the model's context window, the window
    in tokens (0 when the server did not say it); None for any other refusal."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    if error.get("type") == "exceed_context_size_error":  # llama.cpp
        n_ctx = error.get("n_ctx")
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else 0
    message = str(error.get("message", ""))
    if error.get("code") != "context_length_exceeded" and not re.search(
        r"context (length|size|window)|prompt is too long", message, re.IGNORECASE
    ):
        return None
    for pattern in _WINDOW_SAID:
        if found := pattern.search(message):
            return int(found.group(1))
    return 0


def _error_detail(response: httpx.Response) -> str:
    """The server's own message, on one line and shortened."""
    try:
        body = response.json()
    except ValueError:
        text = response.text
    else:
        text = _message_in(body) or ""
    text = " ".join(text.split())
    if len(text) > MAX_DETAIL_CHARS:
        text = text[: MAX_DETAIL_CHARS - 1] + "…"
    return text


def _message_in(body: Any) -> str | None:
    """`error.message` (OpenAI, Anthropic, llama.cpp), `error` or `detail` (FastAPI) text."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    detail = body.get("detail")
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg', '')}"
            for d in detail
            if isinstance(d, dict)
        )
    return None
