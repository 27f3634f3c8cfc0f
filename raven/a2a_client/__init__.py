"""The A2A client: `a2a_send` asks a remote A2A peer for work.

Owns card discovery, interface choice, origin-scoped credentials and reading a
peer's reply. Never follows a redirect, never sends a credential to an origin
other than its own, and never puts one in a result, error or log line.
"""

from raven.a2a_client.send import PeerError, PeerReply, send_message
from raven.a2a_client.tool import A2ASendSource, A2ASendTool

__all__ = ["A2ASendSource", "A2ASendTool", "PeerError", "PeerReply", "send_message"]
