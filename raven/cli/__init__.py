"""The command line: typer commands, one module per command group, and the terminal face.

Commands parse options, load config, call one function and let `main` map
Raven's errors to exit codes. Heavy imports happen inside the commands.
"""
