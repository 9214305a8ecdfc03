"""Ingest, recall and consolidation: pure async functions over a store. No Ray imports."""
