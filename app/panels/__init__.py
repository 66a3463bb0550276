"""The workbench's panels: each owns its widgets, a small view model and its own settings (saved
when changed, under its own QSettings group). MainWindow composes them."""
