"""A real headless Chromium, driven over the DevTools protocol (CDP) through `--remote-debugging-pipe`.

The pipe transport (fd 3: commands in, fd 4: replies and events out, each a JSON message ended by
NUL) is what Puppeteer uses; it needs no port and no websocket library, so the test helper is the
standard library plus Debian's `chromium`, which `make browser` installs.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Chromium:
    """One headless browser process; `render(path)` loads a file the way a reader's browser does."""

    def __init__(self, profile: Path, width: int = 1280, timeout_s: float = 60):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("no chromium on PATH; run `make browser` (apt-get install chromium)")
        self.timeout_s, self.width, self._next_id, self._buf = timeout_s, width, 0, b""
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def fds_3_and_4():  # in the child: the protocol's fixed descriptors (dup2 makes them inheritable)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (cmd_r, out_w)]  # never already 3 or 4
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # close_fds=False: Popen would close 3 and 4 after preexec_fn; every other descriptor of
        # ours is non-inheritable (PEP 446), so nothing else leaks into the browser.

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--hide-scrollbars", f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds_3_and_4, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(cmd_r)
        os.close(out_w)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=900,
                  deviceScaleFactor=1, mobile=False)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError(f"chromium sent nothing for {self.timeout_s} s")
            chunk = os.read(self._out_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium exited: " + self.proc.stderr.read().decode(errors="replace")[-2000:])
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, wait_event: str | None = None, **params) -> dict:
        """Send one command; return its result (after `wait_event` arrived too, when given)."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline, result, seen = time.monotonic() + self.timeout_s, None, wait_event is None
        while result is None or not seen:
            m = self._read_message(deadline)
            if m.get("id") == self._next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                result = m["result"]
            elif m.get("method") == wait_event:
                seen = True
        return result

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"]["value"]

    def render(self, page: Path) -> None:
        """Load a page and wait for its load event (every image then loaded or failed)."""
        self.call("Page.navigate", session=True, wait_event="Page.loadEventFired", url=page.resolve().as_uri())

    def screenshot(self, out: Path) -> tuple[int, int]:
        """The whole page (not only the viewport) as a PNG; returns its CSS width and height."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        w, h = int(size["width"]), int(size["height"])
        shot = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": w, "height": h, "scale": 1})
        out.write_bytes(base64.b64decode(shot["data"]))
        return w, h

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._out_r)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# What a reader sees, read from the rendered page (DOM after load, not the HTML source).
PAGE_IMAGES = ("[...document.images].map(i => ({src: i.getAttribute('src'), complete: i.complete, "
               "width: i.naturalWidth, height: i.naturalHeight, shown: i.getBoundingClientRect().width}))")
PAGE_TABLES = ("[...document.querySelectorAll('table')].map(t => [...t.rows].map("
               "r => [...r.cells].map(c => c.textContent.trim())))")
PAGE_HEADINGS = "[...document.querySelectorAll('h1,h2,h3,h4')].map(h => h.tagName + ' ' + h.textContent.trim())"
PAGE_LIST_ITEMS = "[...document.querySelectorAll('li')].map(li => li.textContent.trim())"
PAGE_PARAGRAPHS = "[...document.querySelectorAll('p')].map(p => p.textContent.trim())"


def main(argv: list[str]) -> int:
    """`python tests/browser.py PAGE.html OUT.png`: the screenshot the report test takes, for docs."""
    if len(argv) != 2:
        print("usage: python tests/browser.py PAGE.html OUT.png", file=sys.stderr)
        return 2
    if chromium_path() is None:
        print("no chromium on PATH: install it (apt-get install chromium)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as profile, Chromium(Path(profile)) as browser:
        browser.render(Path(argv[0]))
        broken = [i["src"] for i in browser.evaluate(PAGE_IMAGES) if i["width"] == 0]
        w, h = browser.screenshot(Path(argv[1]))
    print(f"{argv[1]}: {w}x{h} CSS px" + (f"; broken images: {broken}" if broken else ""))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
