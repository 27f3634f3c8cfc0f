"""The local A2A broker through which the sub-agents of one session ask each other for work.

`broker` holds the tasks and their rules, `channel` serves it on a private socket,
`tool` and `mcp_server` give an agent its `a2a` tool, `entry` names that server for a
child's `mcpServers`. The host that wakes agents is the ACP client's (`acp_client.peers`).
"""
