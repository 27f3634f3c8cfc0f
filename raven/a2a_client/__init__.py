"""The A2A client: `a2a_send` asks a remote A2A peer for work.

Owns card discovery, interface choice, origin-scoped credentials and reading a
peer's reply. Never follows a redirect, never sends a credential to an origin
other than its own, and never puts one in a result, error or log line.

`raven.a2a_client.tool` offers the tool without loading the A2A SDK; `.send`, which
speaks to the peer, loads it on the first call.
"""
