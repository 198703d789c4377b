"""`python -m harness` is the `bakeoff` command."""
from .cli import app

app(prog_name="bakeoff")
