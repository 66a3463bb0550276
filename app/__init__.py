"""Kazeia speech workbench (Qt). The workbench itself arrives with the GUI issue."""
