from __future__ import annotations

import asyncio

from raven.jsonrpc import FrameReader, FrameTooLarge


def reader_for(data: bytes, limit: int = 16) -> asyncio.StreamReader:
    stream = asyncio.StreamReader(limit=limit)
    stream.feed_data(data)
    stream.feed_eof()
    return stream


async def test_frames_longer_than_the_buffer_are_joined() -> None:
    frames = FrameReader(reader_for(b"short\n" + b"x" * 100 + b"\nlast"), max_bytes=1000)
    assert await frames.read() == b"short"
    assert await frames.read() == b"x" * 100
    assert await frames.read() == b"last"
    assert await frames.read() is None


async def test_an_oversized_frame_is_skipped_and_the_next_one_read() -> None:
    frames = FrameReader(reader_for(b"y" * 500 + b"\nnext\n"), max_bytes=100)
    big = await frames.read()
    assert isinstance(big, FrameTooLarge) and big.size >= 500
    assert await frames.read() == b"next"
    assert await frames.read() is None


async def test_a_frame_exactly_at_the_limit_passes() -> None:
    frames = FrameReader(reader_for(b"z" * 100 + b"\n"), max_bytes=100)
    assert await frames.read() == b"z" * 100
