"""Dreaming: a whole profile re-organised into a candidate store that a person reviews.

- ``job``: the ``Dreams`` of a profile (start, resume, status, diff, adopt, discard, cancel);
- ``items``: what a dream reads of a store; ``rules``: the changes the rules make;
- ``model``: merged statements rewritten and insights proposed by a configured model.
"""

from raymem.pipelines.dream.job import STEPS, Dreams, steps_done

__all__ = ["STEPS", "Dreams", "steps_done"]
