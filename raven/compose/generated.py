"""`python -m raven.compose.generated` in a checkout: write what is generated from the code
after a change to it: the events' JSON Schema (docs/events.schema.json, from the engine's
event types), the OpenRPC document (from the RPC contract and that schema), docs/rpc.md and
the web UI's contract.js, the broker's MCP tool. Tests hold each file to what the code builds."""

from __future__ import annotations

import json
from pathlib import Path

from raven.broker.tool import mcp_tool
from raven.engine.codec import events_schema
from raven.rpc.contract import markdown_reference, openrpc_document, web_module

ROOT = Path(__file__).parents[2]


def main() -> None:
    events = events_schema()
    document = openrpc_document(events)
    written = {
        ROOT / "docs" / "events.schema.json": json.dumps(events, indent=2) + "\n",
        ROOT / "rpc-schema" / "openrpc.json": json.dumps(document, indent=2) + "\n",
        ROOT / "docs" / "rpc.md": markdown_reference(document),
        ROOT / "raven" / "web" / "files" / "contract.js": web_module(),
        ROOT / "raven" / "broker" / "a2a_tool.json": json.dumps(mcp_tool(), indent=2) + "\n",
    }
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
