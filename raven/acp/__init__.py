"""The ACP server face (`raven acp`): editors launch it and speak ACP v1 on stdio.

Owns the ACP method table, event translation and the editor-facing asker. Never
writes to stdout except through its JSON-RPC connection; never reaches into
another face.

Importing this package loads nothing: `raven acp` answers `initialize` before the
server and the engine are loaded (`raven.acp.lazy`). Import `raven.acp.server` for
`AcpServer`.
"""
