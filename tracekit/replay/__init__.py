"""``tracekit replay``: rebuild recorded graphs from their ``print_readable`` text and re-run
FSDP collective bucketing on them with other caps. Imports torch (only this package does)."""
