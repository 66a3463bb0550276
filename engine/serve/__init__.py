"""Kazeia as a local speech service: an OpenAI-compatible HTTP server (app.py) on the batched engine
(docs/serving.md)."""
