"""Loading and saving `config.json`: atomic writes, mode 0600, clear errors.

Never leaves a half-written file and never prints a secret.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from raven.config.schema import RavenConfig
from raven.errors import RavenError
from raven.redact import redact

log = logging.getLogger(__name__)
_warned: set[Path] = set()

_SECRET_KEYS = frozenset({"apiKey", "token", "credential", "password"})
_SECRET_MAPS = frozenset({"env", "headers"})
"""Keys whose every value is masked: an MCP server's environment and HTTP headers."""


class ConfigError(RavenError):
    """The config file is unreadable, not JSON, or breaks the schema."""

    exit_code = 2


def load_config(path: Path, must_exist: bool = False) -> RavenConfig:
    """Read and validate the config; a missing file is the empty config unless `must_exist`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if must_exist:
            raise ConfigError(
                f"{path}: no such config file (named by --config or RAVEN_CONFIG); "
                "`raven config init --config PATH` creates one"
            ) from None
        return RavenConfig()
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8 JSON"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    config = parse_config(text, path)
    _warn_if_readable_by_others(path, config)
    return config


def file_mode(path: Path) -> int:
    """The permission bits of `path` (e.g. 0o600)."""
    return stat.S_IMODE(path.stat().st_mode)


def _warn_if_readable_by_others(path: Path, config: RavenConfig) -> None:
    """Warn once per file, as ssh does for keys, when others can read a secret in it."""
    named = [path] + [path.parent / Path(m.script).expanduser() for m in config.models if m.script]
    for file in named:
        if file in _warned:
            continue
        try:
            exposed = file_mode(file) & 0o077 and (
                holds_secret(config) if file == path else _text_holds_secret(file)
            )
        except OSError:
            continue
        if exposed:
            _warned.add(file)
            log.warning(
                "%s holds a secret and other users can read it (mode %o); run: chmod 600 %s",
                file,
                file_mode(file),
                file,
            )


def _text_holds_secret(file: Path) -> bool:
    text = file.read_text(encoding="utf-8", errors="replace")
    return redact(text) != text


def parse_config(text: str, source: Path) -> RavenConfig:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError:
        raise ConfigError(f"{source}: invalid JSON: nested too deeply") from None
    try:
        return RavenConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from exc


def save_config(config: RavenConfig, path: Path) -> None:
    """Write atomically (temp file in the same directory, then rename) with mode 0600."""
    body = json.dumps(config_to_json(config), indent=2) + "\n"
    write_private_file(path, body)


LOCK_WAIT_S = 10.0
"""How long an edit of the config waits for another Raven's edit to finish."""


@contextmanager
def config_lock(path: Path) -> Iterator[None]:
    """Hold the config's edit lock while reading, changing and writing it: ten `raven
    models add` at once keep all ten models. The lock is a file beside the config (the
    file a symlink names); `ConfigError` when another edit holds it past `LOCK_WAIT_S`."""
    from raven.private_files import private_dir

    target = path.resolve() if path.is_symlink() else path
    private_dir(target.parent)
    fd = os.open(target.with_name(f".{target.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConfigError(
                        f"{path}: another Raven has been editing it for over {LOCK_WAIT_S:g}s"
                    ) from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_private_file(path: Path, body: str) -> None:
    """Replace `path` with `body` atomically (a temporary file beside it, then a rename),
    mode 0600; a symlink is written through, to the file it names, and stays a link."""
    from raven.private_files import private_dir

    if path.is_symlink():
        path = path.resolve()
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def config_to_json(config: RavenConfig) -> dict[str, Any]:
    return config.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def masked(data: Any) -> Any:
    """A copy of config JSON with secrets replaced by `***`.

    Secret keys, every value of `env` and `headers`, and any credential `redact`
    recognises inside other strings (`user:password@` in a URL, say).
    """
    if isinstance(data, dict):
        return {k: _masked_value(k, v) for k, v in data.items()}
    if isinstance(data, list):
        return [masked(v) for v in data]
    if isinstance(data, str):
        return redact(data)
    return data


def _masked_value(key: str, value: Any) -> Any:
    if key in _SECRET_KEYS and value:
        return "***"
    if key in _SECRET_MAPS and isinstance(value, dict):
        return {k: "***" if v else v for k, v in value.items()}
    return masked(value)


def holds_secret(config: RavenConfig) -> bool:
    """Whether the config carries a token, key or credential a reader could use: what
    `masked` hides, less what is plainly none (an `env` of `FOO=bar`, the `"apiKey":
    "none"` a local server asks for)."""
    return _secret_in(config_to_json(config))


_PLACEHOLDERS = frozenset(
    {
        *("none", "null", "empty", "dummy", "placeholder", "unused", "not-needed", "no-key"),
        *("ollama", "lm-studio", "sk-no-key-required", "sk-1234", "changeme"),
    }
)
"""Keys local servers accept as "any value" and their docs give (vLLM's `EMPTY`, Ollama's,
LM Studio's, llama.cpp's `sk-no-key-required`), and the like: not secrets."""
_SHORTEST_SECRET = 4
_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|credential|auth|cookie|session")
"""What the name of an `env` variable or a header holding a secret says."""


def _secret_in(data: Any, key: str = "") -> bool:
    if isinstance(data, dict):
        if key in _SECRET_MAPS:
            return any(isinstance(v, str) and _secret_entry(k, v) for k, v in data.items())
        return any(_secret_in(v, k) for k, v in data.items())
    if isinstance(data, list):
        return any(_secret_in(v) for v in data)
    if isinstance(data, str):
        return _real(data) if key in _SECRET_KEYS else redact(data) != data
    return False


def _secret_entry(name: str, value: str) -> bool:
    """Whether an `env` variable or a header holds a secret: by its name, or its value."""
    return (bool(_SECRET_NAME.search(name)) and _real(value)) or redact(value) != value


def _real(value: str) -> bool:
    """Whether a secret's value is one, not a placeholder."""
    return len(value) >= _SHORTEST_SECRET and value.lower() not in _PLACEHOLDERS


STARTER_MODELS = (
    (
        "OPENAI_API_KEY",
        {
            "id": "gpt",
            "name": "OpenAI GPT-4.1 mini",
            "provider": "openai",
            "model": "gpt-4.1-mini",
            "apiKeyEnv": "OPENAI_API_KEY",
        },
    ),
    (
        "ANTHROPIC_API_KEY",
        {
            "id": "claude",
            "name": "Claude Sonnet 4.5",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "apiKeyEnv": "ANTHROPIC_API_KEY",
        },
    ),
)
NO_MODEL_HINT = (
    "no model yet: `raven setup` finds one (a server on this machine, OpenAI, Anthropic), "
    "or `raven models add NAME --base-url URL --model ID`"
)


def starter_config(env: Mapping[str, str] | None = None) -> RavenConfig:
    """What `raven config init` writes: three modes, and a model for each vendor whose key
    `env` holds, the first the default. Never the offline echo model as a default: a
    config with no real model says so when used instead of answering with an echo."""
    env = os.environ if env is None else env
    models = [spec for variable, spec in STARTER_MODELS if env.get(variable)]
    return RavenConfig.model_validate(
        {
            "models": models,
            **({"defaultModel": models[0]["id"]} if models else {}),
            "modes": [
                {"id": "ask", "name": "Ask", "description": "Ask before edits and commands"},
                {
                    "id": "auto",
                    "name": "Auto",
                    "description": "Edit files and run commands without asking",
                    "approvals": "auto",
                },
                {
                    "id": "read-only",
                    "name": "Read only",
                    "description": "Read and search; never write or run",
                    "approvals": "deny",
                },
            ],
            "defaultMode": "ask",
        }
    )


def add_missing_keys(config: RavenConfig, starter: RavenConfig) -> tuple[RavenConfig, list[str]]:
    """`config` with the top-level keys it leaves unset taken from `starter`, and their names."""
    have = config_to_json(config)
    missing = {k: v for k, v in config_to_json(starter).items() if k not in have}
    if not missing:
        return config, []
    return RavenConfig.model_validate({**have, **missing}), list(missing)


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = _loc(err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{where}: {msg}" if where else msg)
    return "; ".join(lines)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
