"""Ingest and recall: pure async functions over a store, and their data types. No Ray imports.

Ingest: ``extract`` (chunks, generator passes; ``generators``, ``rules``), ``temporal``
(dates), ``verify``, ``classify``, ``reconcile``, orchestrated by ``ingest``. Recall:
``query`` (analysis), the ``Recaller`` in ``recall``, ``fusion``, ``answer``. Shared:
``types`` (the data passed between stages) and ``language`` (words and sentences).
"""
