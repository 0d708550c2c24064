"""``python -m baobab``: the ``baobab`` command line, for when its script is not on PATH."""

from baobab.cli import main

main()
