"""Reading Markdown for the docs test: shell commands (fenced blocks, continuations, comments,
leading ``VAR=value`` environments, console transcripts, ``$NAME`` placeholders) and the
headings' anchors that links point at.

The rules (which fences hold commands, how a transcript reads) are ``tests/test_docs.py``'s
docstring; this module only applies them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    text: str  # as written: continuations joined, comment and surrounding space removed
    where: str  # FILE:LINE
    output: tuple[str, ...] = ()  # a console transcript's lines under the command


def strip_comment(line: str) -> str:
    """``line`` without a ``#`` comment: a ``#`` outside quotes at the start of a word."""
    quote, escaped = None, False
    for i, char in enumerate(line):
        if escaped:  # the character after a backslash is literal
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(tag, line number of the first body line, body lines) of every fenced block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^(\s*)(```+)(.*)$", lines[i])
        if not opening:
            i += 1
            continue
        fence, tag = opening.group(2), opening.group(3).strip()
        start, i = i + 2, i + 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        blocks.append((tag, start, body))
        i += 1
    return blocks


def shell_commands(tag: str, body: list[str], where: str, first_line: int) -> list[Command]:
    """The commands of one ``bash`` or ``console`` block."""
    commands: list[Command] = []
    pending, pending_line = "", first_line
    for number, raw in enumerate(body, start=first_line):
        if tag == "console":
            if raw.startswith("$ "):
                commands.append(Command(raw[2:].strip(), f"{where}:{number}"))
            elif commands and raw.strip():
                last = commands[-1]
                commands[-1] = Command(last.text, last.where, (*last.output, raw.strip()))
            continue
        if not pending:
            pending_line = number
        line = strip_comment(raw)
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        text = (pending + line.strip()).strip()
        pending = ""
        if text:
            commands.append(Command(text, f"{where}:{pending_line}"))
    assert not pending, f"{where}: a line continuation runs off the end of its block"
    return commands


def split_env(text: str) -> tuple[dict[str, str], list[str]]:
    """The leading ``VAR=value`` words of a command, and the rest of its words."""
    words = shlex.split(text)
    env = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def is_sweep_value(value: str) -> bool:
    return "," in value and not value.startswith(("[", "{", "'", '"'))


def substitute(text: str, dirs: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        assert name in dirs, f"unknown placeholder ${name} in {text!r}"
        return shlex.quote(dirs[name])

    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", replace, text)


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
