"""Shell completion of what Raven knows: session ids, model and mode ids, agent names.

Each function takes what has been typed and returns the candidates; any failure (no
config, no store yet) means no candidates, never an error in the shell.
"""

from __future__ import annotations

from collections.abc import Callable

LIMIT = 50


def _quietly(find: Callable[[], list[str]], incomplete: str) -> list[str]:
    try:
        return [c for c in find() if c.startswith(incomplete)][:LIMIT]
    except Exception:
        return []


def _config() -> object:
    from raven.config import load_config, resolve_paths

    return load_config(resolve_paths(None).config_file)


def session_ids(incomplete: str) -> list[str]:
    def find() -> list[str]:
        import asyncio

        from raven.config import RavenConfig, resolve_paths
        from raven.engine import Runtime

        async def listed() -> list[str]:
            runtime = Runtime(RavenConfig(), resolve_paths(None), face="cli")
            try:
                return [r.id for r in (await runtime.list_sessions(limit=200)).sessions]
            finally:
                await runtime.aclose()

        return asyncio.run(listed())

    return _quietly(find, incomplete)


def model_ids(incomplete: str) -> list[str]:
    def find() -> list[str]:
        from raven.config import RavenConfig

        cfg = _config()
        assert isinstance(cfg, RavenConfig)
        return [m.id for m in cfg.selectable_models()]

    return _quietly(find, incomplete)


def mode_ids(incomplete: str) -> list[str]:
    def find() -> list[str]:
        from raven.config import RavenConfig

        cfg = _config()
        assert isinstance(cfg, RavenConfig)
        return [m.id for m in cfg.modes]

    return _quietly(find, incomplete)


def agent_names(incomplete: str) -> list[str]:
    def find() -> list[str]:
        from raven.config import RavenConfig

        cfg = _config()
        assert isinstance(cfg, RavenConfig)
        return [a.name for a in cfg.agents if a.enabled]

    return _quietly(find, incomplete)
