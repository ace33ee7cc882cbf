"""vLLM's error vocabulary: extracted from its sources, curated, and measured against logwatch."""
