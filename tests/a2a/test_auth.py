from __future__ import annotations

import pytest

from raven.a2a.auth import authenticate

TOKEN = "s3cret-token"


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", TOKEN]
)
def test_anything_but_the_exact_bearer_token_is_refused(header: str | None) -> None:
    assert authenticate(header, TOKEN) is None


def test_the_right_token_authenticates_the_operator() -> None:
    caller = authenticate(f"bearer {TOKEN}", TOKEN)
    assert caller is not None and caller.is_authenticated and caller.user_name == "operator"


def test_an_empty_configured_token_refuses_everyone() -> None:
    assert authenticate("Bearer ", "") is None
    assert authenticate("Bearer anything", "") is None
