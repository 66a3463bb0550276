"""The synthesis core: a request (requests), its prompt (prompt), the Engine that speaks it (engine: plan,
take, open_take) and what the takes need of it (host); what a text becomes, one prompt or chunks
(long_text), one prompt's audio as frames are made (prompt_stream), one prompt whose text is still
arriving (open_prompt), a take of chunks (chunked_take), a live take (live_take), one prompt's whole take
decoded offline (whole_prompt), many sessions stepped together (batch), threads, placement, the decoder
beside generation (overlap) and the speech decoder."""
