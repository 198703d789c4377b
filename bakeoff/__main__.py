"""`python -m bakeoff` is the `bakeoff` command."""
from bakeoff.harness.cli.app import app

app(prog_name="bakeoff")
