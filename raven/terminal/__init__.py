"""The terminal face: `raven run`, `raven chat` and `raven chat --attach` as people see them.

Renders the engine's events (`view`), asks approvals and questions inline (`asker`),
reads the keyboard (`reader`), and follows a gateway's session over Raven RPC
(`attach`). Reaches sessions and models only through the engine, and the gateway only
through its RPC contract; never imports another face.
"""
