"""The engine's fixtures, for tests of the A2A face on a runtime of their own."""

from tests.engine.conftest import make_runtime

__all__ = ["make_runtime"]
