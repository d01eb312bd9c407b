"""Helpers for the Feed the GPUs course: import the module a lesson names (helpers.env, ...)."""
from helpers.errors import expect_error

__all__ = ["expect_error"]
