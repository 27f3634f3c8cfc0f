"""`python -m raven`: the same program as the `raven` command."""

from raven.cli.main import main

main()
