"""`python -m raven.rpc` in a checkout: write what is generated from the contract (the OpenRPC
document, docs/rpc.md, the web UI's contract.js), after a change to it."""

from __future__ import annotations

import json
from pathlib import Path

from raven.rpc.contract import markdown_reference, openrpc_document, web_module

ROOT = Path(__file__).parents[2]


def main() -> None:
    written = {
        ROOT / "rpc-schema" / "openrpc.json": json.dumps(openrpc_document(), indent=2) + "\n",
        ROOT / "docs" / "rpc.md": markdown_reference(),
        ROOT / "raven" / "web" / "files" / "contract.js": web_module(),
    }
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
