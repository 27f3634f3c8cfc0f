"""The web UI: plain HTML, CSS and ES modules the gateway serves at `/` and `/app/`.

No build step and nothing fetched from elsewhere; the page speaks only Raven RPC over the
gateway's WebSocket. This package holds files, never logic that runs in Raven.
"""

from pathlib import Path

FILES = Path(__file__).parent / "files"
"""The directory served at `/app/` (`index.html` is also served at `/`)."""
