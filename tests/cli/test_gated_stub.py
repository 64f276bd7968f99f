"""The gated stub that the kill / interrupt / recovery tests hold requests with. CI hung for 600 s
when a live run's request arrived just before ``release()`` and was never answered; a killed
client's held request must stay unanswered (tests count ``answered`` to prove no call repeats)."""

import json
import socket
import threading
import urllib.request

from tests.cli.conftest import GatedStub
from tests.waiting import wait_until


def _post(url: str) -> int:
    body = json.dumps({"messages": [{"role": "user", "content": "q"}]}).encode()
    req = urllib.request.Request(f"{url}/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status


def test_a_held_request_whose_client_still_waits_is_answered_after_release():
    with GatedStub(answer_first=0) as stub:
        status = []
        t = threading.Thread(target=lambda: status.append(_post(stub.url)))
        t.start()
        assert stub.held.wait(30)
        stub.release()
        t.join(60)
        assert status == [200]
        wait_until(lambda: len(stub.answered) == 1, 30, "the stub counted its answer")


def test_a_held_request_of_a_client_that_went_away_is_not_answered():
    with GatedStub(answer_first=0) as stub:
        body = json.dumps({"messages": [{"role": "user", "content": "q"}]}).encode()
        with socket.create_connection(("127.0.0.1", stub.port)) as s:
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert stub.held.wait(30)
        stub.release()  # the client closed its socket while its request was held
        wait_until(lambda: stub.in_flight == 0, 30, "the held handler returned")
        assert stub.answered == [] and len(stub.requests) == 1
