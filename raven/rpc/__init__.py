"""Raven RPC, the protocol of the gateway's UIs: its contract (`contract`), declared once,
and the Python client every Python UI speaks it with (`client`). Knows no engine."""
