"""Procedural memory's tables (``procedural.sql``): reads and writes, each write logged.

- ``rows``: the tables' Structs to and from the values SQLite holds, and generic inserts;
- ``actions``: the enabled flag, captured actions, sequences and recorded injections;
- ``patterns``: patterns and their version chains;
- ``metrics``: metric definitions and their benchmark rows;
- ``skills``: skills, their full-text and vector search, and the vectors of sequences and skills;
- ``replay``: the replayer of each ledger op these modules log.

Writes take the ``StoreWriter`` of an open transaction; reads take the profile's async
read connection (``ProfileStore.reader``). No Ray imports.
"""
