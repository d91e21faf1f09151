"""What an equivalent mutant is, and the helper that lists the variants of one line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Equivalent:
    """A mutant no test can tell from the code: its function ("Class.method" or "function")
    and the lines it changes (as ``mutmut show`` prints them, stripped), with the reason."""

    module: str
    function: str
    before: str
    after: str
    reason: str


def variants(
    module: str, function: str, line: str, part: str, replacements: tuple[str, ...], reason: str
) -> list[Equivalent]:
    """The equivalent mutants of ``line`` that put each of ``replacements`` for ``part``
    (mutmut writes a dropped last argument as ``, )``)."""
    return [
        Equivalent(module, function, line, line.replace(part, new), reason) for new in replacements
    ]


def true_flag_variants(
    module: str, function: str, line: str, flag: str, reason: str
) -> list[Equivalent]:
    """The equivalent mutants of ``line``'s last keyword argument ``flag=True``: ``None``,
    dropped and ``False``."""
    replacements = (f"{flag}=None)", ")", f"{flag}=False)")
    return variants(module, function, line, f"{flag}=True)", replacements, reason)
