"""Scripts rendered: reading and checking a script's lines (lines), the resumable render core
(render), and lines and a book's chunks on Ray (cluster)."""
