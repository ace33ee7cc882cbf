"""DuckDB history: schema and migrations, bulk writes, read-only SQL."""
