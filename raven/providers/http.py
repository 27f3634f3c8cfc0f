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
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from raven.config import ModelSpec
from raven.providers.base import (
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
_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


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
        key = spec.api_key or os.environ.get(spec.api_key_env or self.default_key_env) or ""
        base_url = spec.base_url or self.default_base_url
        self.model_id = spec.id
        self.context_window = spec.context_window
        self._spec = spec
        self._endpoint = Endpoint(model=spec.vendor_model, base_url=base_url, secret=key or None)
        self._client = make_client(base_url, self.headers(key), read_timeout_s)

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
                    log.warning(
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
            log.warning("%s: connect failed, retrying in %.1fs", endpoint.label(), delay)
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
    return ProviderError(f"{endpoint.label()}: HTTP {status}{': ' + detail if detail else ''}")


def _error_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"][:300]
    return ""
