"""The exit codes the commands share: 0 done, 1 a fatal incident found, 2 a usage or input
error, 3 no line of vLLM's in a scan's input, 70 the TUI stopped on an error of its own."""

EXIT_OK = 0
EXIT_FATAL_FOUND = 1
EXIT_USAGE = 2
EXIT_NO_VLLM_OUTPUT = 3  # scan: no line of the input was written by vLLM (not "healthy")
EXIT_CRASHED = 70  # tui: stopped on an error of its own, traceback shown (sysexits EX_SOFTWARE)
