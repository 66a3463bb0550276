"""Scripts run by the official PyTorch reference's interpreter (never imported by Kazeia itself)
for side-by-side benchmarks; see kazeia.engine.bench."""
