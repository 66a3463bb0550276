"""Kazeia engine: model files, conversion, synthesis and the `kazeia` command line."""
