"""Kafka I/O: a small Protocol the life cycles are written against, and the real adapter behind it."""
