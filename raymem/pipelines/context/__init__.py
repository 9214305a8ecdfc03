"""The agent's context: core blocks, working memory, episodes, context assembly, refs, flush.

- ``assemble``: the budgeted, stably ordered context (core -> working memory ->
  memories -> episodes -> recent turns) and its allocation of the budget;
- ``render``: the sections as markdown or plain text, deterministic to the byte;
- ``working``: the working-memory snapshot (open work items, tasks, instructions);
- ``episodes``: building episodes (rules or a model) when work closes or a session
  ends, and finding them (recall's ``episode`` channel, the episodes section);
- ``refs``: the record a ``source_ref`` names;
- ``flush``: ingest before compaction, leaving out what the core blocks say.

The store side is in ``raymem.store``: ``blocks``, ``work``, ``episodes``,
``evidence`` and ``refs``.
"""
