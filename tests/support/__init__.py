"""Helpers the tests import: plain modules, so each exists once (fixtures stay in conftest)."""
