"""vLLM's line grammar and record assembly: wrappers and colour stripped (normalize), headers of
every era parsed (vllm_format), years given to timestamps that lack one (year_inference), pasted
and wrapped text undone (pasted), physical lines joined into records such as tracebacks
(assemble), and the lazily decoded lines of one buffer the block scanner works on (buffer_lines,
header_runs). Plain dataclasses in records; no knowledge of signatures."""
