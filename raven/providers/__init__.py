"""Model providers behind one streaming interface.

Each adapter maps provider-neutral messages to one vendor's wire and back. No
`httpx` type or vendor body leaves this package; vendor modules are imported only
when a model of theirs is used.
"""

from raven.providers.base import (
    CHARS_PER_TOKEN,
    ContextTooLong,
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    Provider,
    ProviderError,
    StopReason,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
    chars_tokens,
    estimate_text_tokens,
    estimate_tokens,
    tools_chars,
)
from raven.providers.resolve import NoModelConfigured, create_provider, pick_model

__all__ = [
    "CHARS_PER_TOKEN",
    "ContextTooLong",
    "Finish",
    "FinishReason",
    "ModelEvent",
    "ModelRequest",
    "NoModelConfigured",
    "Provider",
    "ProviderError",
    "StopReason",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallReady",
    "ToolSpec",
    "Usage",
    "chars_tokens",
    "create_provider",
    "estimate_text_tokens",
    "estimate_tokens",
    "pick_model",
    "tools_chars",
]
