"""The minimal pairs guide's commands in the docs test (tests/docs_lists.py merges these)."""

from tests.docs_lists import NETWORK

NOT_RUNNABLE = {
    "git clone https://github.com/alexwarstadt/blimp": NETWORK + "; write_inputs stands in",
}
