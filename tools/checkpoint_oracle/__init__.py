"""The tensor names and shapes transformers gives each model family, as an oracle for the
pre-flight's shape tables (tests/test_checkpoint_families_oracle.py)."""
