"""Model files: GGUF reading (gguf_file, model_file, metadata), the converter from Hugging Face
checkpoints (checkpoint, convert), the text tokenizer, random-weight models and checkpoints for tests and
benches, the bundled demo model, and the errors loading and converting raise."""
