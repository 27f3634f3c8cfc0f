"""Fixtures the end-to-end tests share."""

from tests.e2e.webhooks import receiver  # noqa: F401 (a fixture)
