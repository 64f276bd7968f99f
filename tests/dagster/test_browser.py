"""The UI tests' browser helper (tests/dagster/browser.py, #42 item 7): ``open`` returns only once
the page it was asked for is the one shown. A navigation that does not replace the page (a 204, a
refused connection) left the previous page in the tab, ready by the same test, so the UI test read
one asset's page as the next one's. ``route`` moves inside a single-page app without reloading it
and returns once the page it was asked for is rendered, however late the app renders it."""

import http.server
import threading

import pytest

from tests.dagster.browser import CHROMIUM, Browser

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make chromium` installs it as root)"),
]
READY = "document.getElementById('page')"

# A single-page app: renders the path it is at, a while after its router hears of a new one
# (as an app that fetches the page's data first).
SPA = """<html><body><div id=page></div><script>
function render() {
  const path = location.pathname + location.search;
  setTimeout(() => { const e = document.getElementById('page'); e.dataset.path = path; e.innerText = path; }, 300);
}
window.addEventListener('popstate', render);
render();
</script></body></html>"""


def _shows(path: str) -> str:
    return f"document.querySelector('#page[data-path=\"{path}\"]')"


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/no-content":
            self.send_response(204)  # the browser keeps the page it has
            self.end_headers()
            return
        body = SPA if self.path.startswith("/app/") else f"<html><body><div id=page>{self.path}</div></body></html>"
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_open_waits_for_the_page_asked_for_and_fails_when_it_never_comes(site):
    with Browser(800, 600) as browser:
        browser.open(f"{site}/first", READY)
        assert browser.js(f"{READY}.innerText") == "/first"
        browser.open(f"{site}/second", READY)
        assert browser.js(f"{READY}.innerText") == "/second"
        # the tab still shows /second, which satisfies READY: open must not take it for the new page
        with pytest.raises(RuntimeError, match="ERR_ABORTED"):
            browser.open(f"{site}/no-content", READY)
        assert browser.js(f"{READY}.innerText") == "/second"
        browser.open(f"{site}/third", READY)  # the tab is still usable
        assert browser.js(f"{READY}.innerText") == "/third"


def test_route_moves_inside_the_app_without_reloading_it_and_waits_for_the_new_page(site):
    with Browser(800, 600) as browser:
        browser.open(f"{site}/app/one", _shows("/app/one"))
        browser.js("window.kept = 'yes'")  # gone if the document were loaded again
        browser.route("/app/two?x=1", _shows("/app/two?x=1"))
        # returned only once the app had rendered the new page (it renders 300 ms after the change)
        assert browser.js("document.getElementById('page').innerText") == "/app/two?x=1"
        assert browser.js("window.kept") == "yes"  # the same document: the app was not loaded again
        # a page the app never shows is waited for, then refused
        with pytest.raises(pytest.fail.Exception, match="not within"):
            browser.route("/app/three", _shows("/app/never"), timeout_s=3)
