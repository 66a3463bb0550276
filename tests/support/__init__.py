"""What the tests share: the goldens' paths and cases, the command line as a user runs it, the fake hub,
the workbench's fixtures, the layout checker and the ALSA capture devices."""
