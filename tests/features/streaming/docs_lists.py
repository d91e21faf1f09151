"""The streaming guide's commands in the docs test (tests/docs_lists.py merges these)."""

from tests.docs_lists import NETWORK

NOT_RUNNABLE = {"python train.py data=tinystories data.streaming=true": NETWORK}
