"""Kazeia speech workbench (Qt): `kazeia-workbench [MODEL]` or `python -m kazeia.app`."""
