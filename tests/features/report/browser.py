"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ending in a NUL byte, commands on fd 3, answers and events on fd 4), so that a
test can open a page from disk, run JavaScript in it, collect its errors and take a
screenshot without a WebDriver or any other package. Debian's ``chromium`` (``.ci/run``
installs it); ``CHROMIUM`` names another binary.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = (
    os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
)


class Browser:
    """One headless browser with one page; ``errors`` collects what the page logs as errors
    (uncaught exceptions, console.error, failed loads)."""

    def __init__(self, profile: Path) -> None:
        if CHROMIUM is None:
            raise FileNotFoundError("no chromium on PATH (apt-get install chromium)")
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()
        flags = "--headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars"
        self.process = subprocess.Popen(
            [
                "bash",
                "-c",
                f'exec "$CHROMIUM" {flags} --remote-debugging-pipe --user-data-dir="$PROFILE" '
                '--window-size=1280,1600 3<&"$IN" 4>&"$OUT"',
            ],
            env={
                **os.environ,
                "CHROMIUM": CHROMIUM,
                "PROFILE": str(profile),
                "IN": str(commands_read),
                "OUT": str(answers_write),
            },
            pass_fds=(commands_read, answers_write),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._buffer = b""
        self._next_id = 0
        self.errors: list[str] = []
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=self.session)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Run one command and return its result (events that arrive first are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._receive()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def open(self, path: Path) -> None:
        """Load ``path`` from disk and wait for its load event."""
        self.events.clear()  # the load event to wait for is this navigation's
        self.send("Page.navigate", session=self.session, url=path.resolve().as_uri())
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self._receive()

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        result = self.send(
            "Runtime.evaluate", session=self.session, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        """The whole page as PNG bytes."""
        shot = self.send("Page.captureScreenshot", session=self.session, captureBeyondViewport=True)
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):  # it may be gone already
            self.send("Browser.close")
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self._commands)
        os.close(self._answers)

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._answers, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        text, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(text)
        if "method" in message:
            self.events.append(message)
            self._note_error(message)
        return message

    def _note_error(self, event: dict[str, Any]) -> None:
        params = event.get("params", {})
        if event["method"] == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(json.dumps(params.get("args", []))[:500])
        elif event["method"] == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(params["entry"].get("text", ""))
