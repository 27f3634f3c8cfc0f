"""The floor for bench/startup_instructions.py: a typer application of two commands,
one of them invoked, which takes no option and prints a line: what running any command
of a typer CLI costs before the command does anything."""

import typer

app = typer.Typer(add_completion=False)


@app.command()
def hello() -> None:
    print("hello")


@app.command()
def other() -> None:
    print("other")


if __name__ == "__main__":
    app()
