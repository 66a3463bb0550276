"""A long take on disk, for books, `say --text-file` and the workbench: the chunk store and the
batched chunk maker (chunks), a take written from its chunks piece by piece (assemble), subtitles, and
`say --text-file`'s take (take)."""
