"""The synthesis core: a request (requests), its prompt (prompt), the Engine that speaks it (engine), one
synthesis as chunks (audio_stream), a text still being written (text_stream, streamed_take), a composed
text's chunks (long_text), many sessions stepped together (batch), threads, placement, the decoder
beside generation (overlap) and the speech decoder."""
