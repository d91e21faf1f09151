"""Mutation testing with mutmut, run by hand: ``python -m tools.mutation`` (run.py), the
equivalent mutants a line mark cannot single out (equivalents.py) and the checks that keep
every mark true (marks.py)."""
