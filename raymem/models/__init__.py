"""Embedding and generation backends. No Ray imports."""
