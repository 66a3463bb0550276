"""Books and other long work: read (source), spoken chunk by chunk to disk (chunks), written chapter by
chapter (assemble), measured (loudness) and finished (export, subtitles); render ties them together."""
