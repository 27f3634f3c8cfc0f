"""A bare aiohttp handler answering a fixed JSON-RPC result: what the load client can drive.

python bench/floor/bare_aiohttp.py PORT
"""

from __future__ import annotations

import sys

from aiohttp import web

BODY = (
    b'{"jsonrpc":"2.0","id":1,"result":'
    b'{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED"}}}}'
)


async def rpc(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=BODY, content_type="application/json")


if __name__ == "__main__":
    app = web.Application()
    app.router.add_post("/a2a", rpc)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
