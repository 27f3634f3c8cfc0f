from __future__ import annotations

from raven.a2a.turn import MintedContexts


def test_minted_contexts_are_recognised_once_and_others_never() -> None:
    minted = MintedContexts()
    context_id = minted.generate()
    assert minted.take(context_id) is True
    assert minted.take(context_id) is False
    assert minted.take("a-client-chose-this") is False


def test_minted_contexts_forget_the_oldest_beyond_the_limit() -> None:
    minted = MintedContexts()
    first = minted.generate()
    for _ in range(MintedContexts.MAX_REMEMBERED):
        minted.generate()
    assert minted.take(first) is False
