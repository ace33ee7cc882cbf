"""The pure core: grammar, assembly, signatures, matching. No I/O, no clock, no shell libraries."""
