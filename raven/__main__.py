from raven.cli.main import main

main()
