"""Learners' answers to the exercises, written from the task text alone by someone who did not write its check.

lessonNN.py: WRONG, the learner-view corpus (exercise id -> Wrong answers, each with words its verdict must contain),
and RIGHT (exercise id -> alternative right forms the check must accept). heldout/lessonNN.py: HELDOUT, an independent
set of wrong answers by another author, never shown to the checks' authors; tests/test_learner_answers.py measures
the share the checks reject.
"""
