"""``quandary council check`` / ``quandary council calls`` against the scripted provider."""

import json

from cli import main
from tests.llm_fakes import http_error, json_reply

CONFIG = """
members:
  good: {model: scripted/good, max_retries: 0}
  flaky: {model: scripted/flaky, max_retries: 1, backoff_base_s: 0.001}
councils:
  default: [good, flaky]
"""


def write_config(tmp_path):
    p = tmp_path / "council.yaml"
    p.write_text(CONFIG)
    return str(p)


def test_check_reports_each_member_and_fails_if_one_fails(scripted, tmp_path, capsys):
    scripted.responder = lambda req: (
        json_reply({"status": "ok", "answer": 5}) if "good" in req.model else http_error(503)
    )
    code = main(["council", "check", "--config", write_config(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "good" in out and '"answer": 5' in out
    assert "FAILED" in out and "503" in out and "1/2 members ok" in out


def test_check_ok_and_bypasses_cache(scripted, tmp_path, capsys):
    scripted.responder = lambda req: json_reply({"status": "OK", "answer": 5})
    cfg = write_config(tmp_path)
    assert main(["council", "check", "--config", cfg, "--json"]) == 0
    assert main(["council", "check", "--config", cfg, "--json"]) == 0
    assert scripted.count == 4  # a health check always makes a real request
    rows = json.loads(capsys.readouterr().out.split("\n", 1)[1].rsplit("council config", 1)[0])
    assert {r["member"] for r in rows} == {"good", "flaky"} and all(r["ok"] for r in rows)


def test_calls_summary(scripted, tmp_path, capsys):
    scripted.responder = lambda req: json_reply({"status": "ok", "answer": 5}) if "good" in req.model else "nope"
    cfg = write_config(tmp_path)
    main(["council", "check", "--config", cfg])
    capsys.readouterr()
    assert main(["council", "calls", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_member = {s["group"]: s for s in report["by_member"]}
    assert by_member["good"]["calls"] == 1 and by_member["good"]["failures"] == 0
    assert by_member["flaky"]["failures"] == 1
    assert report["by_tag"][0]["group"] == "council_check" and report["total"][0]["calls"] == 2
    assert by_member["good"]["prompt_tokens"] == 10 and by_member["good"]["p50_ms"] > 0
    assert main(["council", "calls"]) == 0
    text = capsys.readouterr().out
    assert "member" in text and "p90_ms" in text and "council_check" in text


def test_calls_without_log(quandary_home, capsys):
    assert main(["council", "calls"]) == 0
    assert "no call log" in capsys.readouterr().out
