"""Log sources: bytes in, newline-complete chunks with their positions out."""
