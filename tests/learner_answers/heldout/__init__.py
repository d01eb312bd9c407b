"""Held-out wrong answers (see tests/learner_answers/__init__.py): read by the test only, not registered beside the checks."""
