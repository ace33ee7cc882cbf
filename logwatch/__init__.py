"""logwatch: recognise, explain and fix vLLM failures from its logs."""

__version__ = "0.1.0"
