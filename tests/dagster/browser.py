"""One headless Chromium for many pages, over the DevTools protocol (test helper).

Why not ``chromium --dump-dom URL`` per page: every call started a browser (~4 s on 2 busy cores)
and waited out a fixed virtual-time budget; the UI test visits every asset page. Here one browser,
one tab: :meth:`Browser.open` navigates and waits until the page says it is ready (an event to wait
on, not a sleep), :meth:`Browser.js` reads what is rendered, including where things are on screen,
so a test can assert what is *visible* (not cut off by the value column's edge), not only present.
"""

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from tests.waiting import wait_until

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


class Browser:
    """``with Browser(1366, 3000) as b: b.open(url, "document.title"); b.js("...")``."""

    def __init__(self, width: int, height: int):
        from websockets.sync.client import connect  # lazy: only the UI tests need it

        # chromium's helper processes may still write there as it exits: leftovers are not an error
        self._closing = contextlib.ExitStack()  # the DevTools connection, closed in close()
        self._profile = tempfile.TemporaryDirectory(prefix="quandary-chromium-", ignore_cleanup_errors=True)
        self._proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",  # root in a container
                "--disable-gpu",
                "--hide-scrollbars",
                f"--window-size={width},{height}",
                "--remote-debugging-port=0",
                f"--user-data-dir={self._profile.name}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its helper processes end with it (close)
        )
        try:
            url = None
            for line in self._proc.stderr:  # it prints its endpoint once it listens
                found = re.search(r"DevTools listening on (ws://\S+)", line)
                if found:
                    url = found.group(1)
                    break
            assert url, "chromium did not start its DevTools endpoint"
            # what it logs later is drained, or a full pipe would stall it
            threading.Thread(target=self._proc.stderr.read, daemon=True).start()
            self._ws = self._closing.enter_context(connect(url, max_size=None, open_timeout=60))
            self._ids = itertools.count(1)
            target = self._call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime"):
                self._call(f"{domain}.enable", session=True)
            self._call(
                "Emulation.setDeviceMetricsOverride",
                session=True,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, session: bool = False, **params) -> dict:
        msg_id = next(self._ids)
        msg = {"id": msg_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self._session
        self._ws.send(json.dumps(msg))
        while True:  # events of the page arrive in between: skipped, the tests read the DOM instead
            reply = json.loads(self._ws.recv(timeout=120))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def js(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        out = self._call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression[:80]}: {out['exceptionDetails'].get('text')}")
        return out["result"].get("value")

    def open(self, url: str, ready: str, timeout_s: float = 120) -> None:
        """Navigate to ``url`` and wait until the JavaScript expression ``ready`` is true *on the new
        page*: the page being left is marked first, so it never passes for the new one (a navigation
        that does not replace it, or an answer to Page.navigate before the new page is in place, left
        the previous asset's page to be read as this one's). A failed navigation raises at once."""
        self.js("window.__quandaryLeft = true")
        nav = self._call("Page.navigate", session=True, url=url)
        if nav.get("errorText"):
            raise RuntimeError(f"{url}: {nav['errorText']}")
        expression = f"!window.__quandaryLeft && document.readyState === 'complete' && !!({ready})"

        def ready_now():
            try:
                return self.js(expression)
            except RuntimeError as exc:  # the old page's context went away under the call
                if "context" in str(exc).lower():
                    return False
                raise

        wait_until(ready_now, timeout_s, f"{url} ready")

    def route(self, path: str, ready: str, timeout_s: float = 120) -> None:
        """Go to ``path`` (``/assets/x?partition=y``) inside the single-page app already open, the
        way a click on one of its links does: the history entry changes and the app's router renders
        the new page, without loading and starting the whole app again (~1 s of CPU per Dagster
        page on the test machine, #44). The tab keeps its document, so no marker can tell the old
        page from the new one: ``ready`` must name what only the new page shows."""
        self.js(
            f"window.history.pushState(null, '', {json.dumps(path)});"
            "window.dispatchEvent(new PopStateEvent('popstate', {state: null}))"
        )
        expression = f"location.pathname + location.search === {json.dumps(path)} && !!({ready})"
        wait_until(lambda: self.js(expression), timeout_s, f"{path} ready")

    def html(self) -> str:
        return self.js("document.documentElement.outerHTML")

    def screenshot(self, path: Path) -> Path:
        data = self._call("Page.captureScreenshot", session=True, format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            try:
                self._call("Browser.close")  # a clean exit: it ends its helper processes itself
            except Exception:  # noqa: BLE001 - a browser that cannot answer is killed below
                pass
        self._closing.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)  # whatever of its group is left
        except ProcessLookupError:
            pass
        self._proc.wait(timeout=30)
        self._profile.cleanup()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
