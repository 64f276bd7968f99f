"""The hardening probe of issues 23, 34 and 45, re-runnable: each item's attacks against the current
code (1-9: issue 23; 10-18: issue 34; 19-26: issue 45), and one table ``item | tries | held | failed | note``.

    .venv/bin/python bench/bench_hardening_probe.py [--items 1,2,9] [--verbose] [--strict] [--keep] [--smoke]

``--smoke`` runs the seconds-long items only (strict: exit 1 when a try failed).

Everything runs in a scratch folder (its own QUANDARY_HOME, DAGSTER_HOME and spill folder); LLM
calls go to the loopback fault stub (tests/llm/fault_stub.py), never to the embedded model.
Hostile queries run in child processes under a 3 GB address-space cap, and their memory is the
peak of the sum of the RSS of the child and its workers, sampled every 0.1 s. A try is *held* when
the product refused or bounded the attack on its own, with the message the issue asks for. A
few minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

import polars as pl
import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))
WORK = Path(tempfile.mkdtemp(prefix="hardening-probe-"))
HOME = WORK / "home"
os.environ.update(QUANDARY_HOME=str(HOME), DAGSTER_HOME=str(WORK / "dagster"), QUANDARY_SPILL_DIR=str(WORK / "spill"))
os.environ.pop("QUANDARY_COUNCIL_CONFIG", None)
(WORK / "dagster").mkdir(parents=True)
CLI = "import sys; from cli import main; sys.exit(main(sys.argv[1:]))"
MEM_CAP = 3 << 30


@dataclass
class Try:
    name: str
    held: bool
    note: str = ""


# ------------------------------------------------------------------------------------------ helpers


def cli(*args: str) -> tuple[int, str, str]:
    """`quandary ARGS` in this process: (exit code, stdout, stderr)."""
    from cli import main  # lazy: the name means something else at module level

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse refusing a value
            rc = exc.code if isinstance(exc.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            out += _tree(int(child))
    except OSError:
        pass
    return out


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Child:
    rc: int | None
    out: str
    err: str
    seconds: float
    peak_mb: float


def run_child(
    args: list[str], *, cwd: Path = ROOT, wall_s: float = 120, env: dict | None = None, interrupt_when=None
) -> Child:
    """`quandary ARGS` in a child process under the address-space cap; its tree's peak RSS. ``env``
    values of None remove a variable. With ``interrupt_when(pid)``, SIGINT goes to the child's
    group once it returns true (``seconds`` then counts from the signal). ``rc`` is None when the
    probe had to kill the child at ``wall_s``."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env = {k: v for k, v in full_env.items() if v is not None}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEM_CAP, MEM_CAP)),
    )
    out: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda k, s: out.__setitem__(k, s.read()), args=(k, s))
        for k, s in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for r in readers:
        r.start()
    peak, sent, killed = 0, None, False
    while proc.poll() is None:
        peak = max(peak, sum(_rss(p) for p in _tree(proc.pid)))
        if interrupt_when and sent is None and interrupt_when(proc.pid):
            os.killpg(proc.pid, signal.SIGINT)
            sent = time.monotonic()
        if time.monotonic() - t0 > wall_s:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            proc.wait()
        time.sleep(0.1)  # the memory watch's sampling interval, not a wait for the result
    for r in readers:
        r.join()
    return Child(
        None if killed else proc.returncode,
        out.get("out", ""),
        out.get("err", ""),
        time.monotonic() - (sent or t0),
        peak / 2**20,
    )


def lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


def demo_db(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        write_demo_db(path)
    return path


# ------------------------------------------------------------------------------------------ item 1


def item1() -> list[Try]:
    good = {
        "db_id": "university",
        "question": "How many departments?",
        "sql": "SELECT 1",
        "category": {"name": "Answerable", "subname": "Without Evidence"},
    }
    guarded = artifacts.write_version(pl.DataFrame({"a": [1] * 24}), "candidates", "x")
    latest = (guarded.path.parent / "LATEST").read_text()
    outside = WORK / "abs-import-target"
    tries = []

    def imported(db_id, name, **kw):
        path = WORK / "in1.json"
        path.write_text(json.dumps([good, dict(good, db_id=db_id)]))
        rc, _, err = cli("import", str(path), *kw.get("extra", ()))
        ok = (
            rc != 0
            and len(lines(err)) == 1
            and "record 1" in err
            and (guarded.path.parent / "LATEST").read_text() == latest
            and not outside.exists()
            and not (artifacts_dir() / "imported_dataset").exists()
        )
        tries.append(Try(name, ok, "" if ok else f"rc={rc} {err.strip()[:120]}"))

    imported("../candidates/x", "db_id ../candidates/x (repoint the pipeline's candidates)")
    imported(str(outside), "absolute db_id")
    for bad in ("..", "a/b", ".hidden", "x\x00y", "a" * 300):
        imported(bad, f"db_id {bad[:12]!r}")
    for asset in ("../escape", "candidates", "/tmp/x"):
        path = WORK / "in1.json"
        path.write_text(json.dumps([good]))
        rc, _, err = cli("import", str(path), "--asset", asset)
        tries.append(Try(f"--asset {asset}", rc == 2 and len(lines(err)) == 1, err.strip()[:120]))
    for asset, part in (("ok", "../p"), ("../a", "p"), ("ok", "/abs")):
        try:
            artifacts.write_version(pl.DataFrame({"a": [1]}), asset, part)
            tries.append(Try(f"storage write_version({asset!r}, {part!r})", False, "written"))
        except UnsafePathError:
            tries.append(Try(f"storage write_version({asset!r}, {part!r})", True))
    return tries


# ------------------------------------------------------------------------------------------ item 2


def item2() -> list[Try]:
    """AI-operator SQL (`aisql run`): bad timeouts, then hostile queries under a 2 s budget."""
    tries = []
    for value in ("nan", "inf", "0", "-1"):
        rc, _, err = cli("aisql", "run", "movie", "SELECT 1", "--timeout", value)
        tries.append(Try(f"--timeout {value}", rc == 2, "" if rc == 2 else f"accepted (rc={rc})"))
    if not (SHARED / "sembench").is_dir():
        return tries + [Try("hostile queries", False, "../shared/data/sembench missing: not probed")]
    data = ["--data", str(SHARED)]
    base = run_child(["aisql", "run", "movie", "SELECT 1 AS x", "--timeout", "5", *data], wall_s=120)
    budget = 2.0
    for name, sql in (
        (
            "3 x repeat('x', 1e9)",
            "SELECT length(repeat('x', 1000000000)) + length(repeat('y', 1000000000)) "
            "+ length(repeat('z', 1000000000)) AS n",
        ),
        ("range(1e12)", "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3"),
    ):
        c = run_child(["aisql", "run", "movie", sql, "--timeout", str(budget), *data], wall_s=60)
        extra = c.seconds - base.seconds
        ok = c.rc not in (None, 0) and extra <= 1.5 * budget + 1.0 and c.peak_mb < 1024
        tries.append(
            Try(
                f"aisql run {name}, --timeout {budget:g}",
                ok,
                f"{'killed by the probe at 60 s' if c.rc is None else f'rc={c.rc}'}, +{extra:.1f} s over "
                f"`SELECT 1`, peak {c.peak_mb:.0f} MB; {(lines(c.err) or [''])[0][:90]}",
            )
        )
    return tries


# ------------------------------------------------------------------------------------------ item 3


def item3() -> list[Try]:
    """Relative database paths given from another folder mean that folder, also across processes."""
    elsewhere = WORK / "elsewhere"
    db = demo_db(elsewhere / "seeds" / "uni.sqlite")
    rel, absolute = "seeds/uni.sqlite", str(db)
    q = "SELECT COUNT(*) FROM departments"
    env = {"QUANDARY_SQL_IN_PROCESS": None}  # the worker process, where the path crosses over
    tries = []
    here, there = (run_child(["sql", p, q], cwd=elsewhere, env=env) for p in (rel, absolute))
    rows = [lines(c.out)[:-1] for c in (here, there)]  # the last line is the timing
    tries.append(
        Try(
            "sql seeds/uni.sqlite from another folder",
            here.rc == 0 and rows[0] == rows[1] != [],
            f"rc={here.rc} {rows[0]} vs {rows[1]} {here.err.strip()[:80]}",
        )
    )
    here, there = (
        run_child(["generate", "programmatic", p, "--json"], cwd=elsewhere, env=env, wall_s=300)
        for p in (rel, absolute)
    )
    n_here, n_there = len(lines(here.out)), len(lines(there.out))
    tries.append(
        Try(
            "generate programmatic seeds/uni.sqlite",
            here.rc == 0 and n_here == n_there > 3,
            f"{n_here} vs {n_there} candidates (absolute path)",
        )
    )
    eq = run_child(["equiv", rel, q, q], cwd=elsewhere, env=env)
    tries.append(Try("equiv seeds/uni.sqlite", eq.rc == 0, f"rc={eq.rc} {eq.err.strip()[:100]}"))
    missing = run_child(["sql", "seeds/nope.sqlite", q], cwd=elsewhere, env=env)
    named = str(elsewhere / "seeds" / "nope.sqlite") in missing.err or "seeds/nope.sqlite" in missing.err
    tries.append(
        Try(
            "sql on a missing relative path names the path typed",
            missing.rc not in (0, None) and named and str(ROOT / "seeds") not in missing.err,
            missing.err.strip()[:100],
        )
    )
    cwd = os.getcwd()
    os.chdir(elsewhere)
    try:
        rc, _, err = cli("db", "register", rel, "--db-id", "rel_uni")
    finally:
        os.chdir(cwd)
    stored = Catalog().get("rel_uni").path if rc == 0 else None
    tries.append(Try("db register seeds/uni.sqlite", stored == str(db.resolve()), f"stored {stored}"))
    return tries


# ------------------------------------------------------------------------------------------ item 4


@contextlib.contextmanager
def patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def _tmp_write_fails(code):
    """Writes to temp files fail with ``code`` (the storage fault tests' injection)."""

    with pytest.MonkeyPatch.context() as mp:
        _inject_enospc_on_tmp_write(mp, code)
        yield


def item4() -> list[Try]:
    from tests.storage.test_storage_faults import _FaultyConn  # writes fail like a full or read-only disk

    tries = []
    fault = {"on": False, "exc": None}
    real_conn = CallLog._conn

    def rec(cid):
        return CallRecord(
            call_id=cid,
            status="ok",
            member="m",
            model="openai/m",
            request={"x": cid},
            raw_response='{"verdict": "yes"}',
            parsed={"verdict": "yes"},
            attempts=1,
        )

    with patched(CallLog, "_conn", lambda self: _FaultyConn(real_conn(self), fault)):
        for exc, must in (
            (sqlite3.OperationalError("database or disk is full"), "ENOSPC"),
            (OSError(errno.EROFS, "Read-only file system"), "EROFS"),
        ):
            log = CallLog(WORK / f"log-{must}.sqlite")
            fault.update(on=True, exc=exc)
            try:
                log.record(rec("a"))
                tries.append(Try(f"call log write, {must}", False, "no error"))
            except CallLogError as err:
                ok = must in str(err) and "damaged" not in str(err) and not isinstance(err, CallLogDamaged)
                kept = log.lookup("a") is not None
                fault["on"] = False
                log.close()
                again = CallLog(log.path).lookup("a") is not None
                tries.append(
                    Try(
                        f"call log write, {must}: named, answer kept and merged later",
                        ok and kept and again,
                        str(err)[:100],
                    )
                )
        tries.append(_council_on_full_disk(fault))
    for code, name in ((errno.ENOSPC, "ENOSPC"), (errno.EROFS, "EROFS")):
        root = WORK / f"art-{name}"
        with _tmp_write_fails(code):
            try:
                artifacts.write_version(pl.DataFrame({"a": [1]}), "candidates", "uni", root)
                tries.append(Try(f"artifact write, {name}", False, "no error"))
            except OSError as err:
                left = [p.name for p in (root / "candidates" / "uni").iterdir() if p.name.endswith(".tmp")]
                tries.append(
                    Try(
                        f"artifact write, {name}: named, no temp file left",
                        name in str(err) and "damaged" not in str(err) and not left,
                        str(err)[:100],
                    )
                )
    tries.append(_run_failure_on_read_only_folder())
    return tries


def _council_on_full_disk(fault) -> Try:
    """Two answered calls while the log is full are not requested again once space is freed."""

    class Verdict(BaseModel):
        verdict: str

    with FaultStub(default="ok") as stub:
        m = Member(
            name="stub",
            model="openai/stub",
            api_base=stub.base_url,
            max_retries=0,
            timeout_s=20.0,
            structured_output="prompt",
            repair=False,
        )
        council = Council("validators", [m], call_log())
        fault.update(on=True, exc=sqlite3.OperationalError("database or disk is full"), match="excluded.")
        first = [council.ask("stub", [{"role": "user", "content": f"q{i}"}], Verdict) for i in range(2)]
        fault.update(on=False, match="")
        call_log().close()
        again = [council.ask("stub", [{"role": "user", "content": f"q{i}"}], Verdict) for i in range(2)]
    ok = all(r.ok for r in first) and all(r.ok and r.cached for r in again) and stub.requests == 2
    return Try(
        "council answers while the log is full: not re-requested",
        ok,
        f"{stub.requests} requests for 2 calls; {(first[0].error or '')[:80]}",
    )


def _run_failure_on_read_only_folder() -> Try:
    from dagster import asset, materialize  # lazy: dagster is slow to import (~1 s); only the tests that need it pay

    # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.io_manager import VersionedParquetIOManager

    @asset  # no return annotation: this module's annotations are strings Dagster cannot resolve
    def small():
        return pl.DataFrame({"a": [1]})

    root = WORK / "art-run"
    with _tmp_write_fails(errno.EROFS):
        result = materialize(
            [small], resources={"io_manager": VersionedParquetIOManager(base_dir=str(root))}, raise_on_error=False
        )
    line = first_failure(result) if not result.success else "succeeded"
    ok = not result.success and "EROFS" in line and "DagsterExecutionHandleOutputError" not in line
    return Try("a run writing to a read-only folder says EROFS", ok, line[:100])


# ------------------------------------------------------------------------------------------ item 5


def item5() -> list[Try]:
    tries = []
    cases = {
        "LATEST and versions.jsonl lost": ("LATEST", "versions.jsonl"),
        "LATEST lost": ("LATEST",),
        "versions.jsonl lost": ("versions.jsonl",),
        "LATEST garbage, versions.jsonl lost": ("versions.jsonl", "garbage"),
        "pointers lost and every content file damaged": ("LATEST", "versions.jsonl", "damage"),
    }
    for name, what in cases.items():
        root = WORK / f"lost-{len(tries)}"
        for part in ("a", "b"):
            v = artifacts.write_version(pl.DataFrame({"x": [1, 2, 3] * 8}), "dataset", part, root)
        folder = v.path.parent
        for f in what:
            if f == "garbage":
                (folder / "LATEST").write_text("not-a-file")
            elif f == "damage":
                v.path.write_bytes(b"damaged")
            else:
                (folder / f).unlink()
        warnings = []
        con = open_audit(root=root, llm_log=WORK / "none.sqlite", warn=warnings.append)
        try:
            rows = con.execute("SELECT count(*) FROM dataset").fetchone()[0]
        finally:
            con.close()
        named = any("dataset[b]" in w or str(folder) in w for w in warnings)
        ok = rows == 48 or (rows == 24 and named)  # kept, or dropped loudly naming the partition
        tries.append(Try(name, ok, f"{rows}/48 rows; {'warned' if named else 'no warning naming it'}"))
    return tries


# ------------------------------------------------------------------------------------------ item 6


def item6() -> list[Try]:
    from assets.abiss.assets import _db  # lazy: imports dagster (~1 s); only the tests that need it pay
    from assets.shared.resources import SeedCatalogResource

    tries = []
    db = demo_db(WORK / "seed6" / "uni6" / "uni6.sqlite")
    info = Catalog().register(db, "uni6")
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE edited(x)")
    con.commit()
    con.close()
    for name, step in (
        ("the steps' seed check", lambda: check_seed_unchanged(str(db), info.sha256, "uni6")),
        ("the seed catalog resource", lambda: SeedCatalogResource().entry("uni6")),
        (
            "the ABISS step's database row",
            lambda: _db(pl.DataFrame([{"db_id": "uni6", "path": str(db), "sha256": info.sha256}])),
        ),
    ):
        try:
            step()
            tries.append(Try(f"edited seed, read by {name}", False, "read the edited file"))
        except SeedChangedError as exc:
            tries.append(Try(f"edited seed, read by {name}", info.sha256[:12] in str(exc), str(exc)[:90]))
    other = demo_db(WORK / "seed6b" / "uni6.sqlite")
    rc, _, err = cli("db", "register", str(other), "--db-id", "uni6")
    tries.append(
        Try(
            "db register of a registered id with another file",
            rc == 1 and "--replace" in err and Catalog().get("uni6").sha256 == info.sha256,
            err.strip()[:90],
        )
    )
    rc, _, err = cli("db", "register", str(WORK / "seed6"), "--folder")
    tries.append(
        Try(
            "db register --folder with a changed file",
            rc == 1 and "--replace" in err and Catalog().get("uni6").sha256 == info.sha256,
            (lines(err) or [""])[0][:90],
        )
    )
    return tries


# ------------------------------------------------------------------------------------------ item 7


def item7() -> list[Try]:
    # lazy: dagster is slow to import (~1 s); only the tests that need it pay
    from dagster import DagsterInvalidConfigError, validate_run_config

    from assets.definitions import MAIN_JOB, defs  # lazy: imports dagster (~1 s); only the tests that need it pay

    job = defs.resolve_job_def(MAIN_JOB)
    HOME.mkdir(parents=True, exist_ok=True)
    foreign = HOME / "council-home.yaml"
    foreign.write_text(
        "members:\n  m:\n    model: openai/x\n    api_base: http://127.0.0.1:9/v1\n"
        "    api_key_env: HOME\ncouncils:\n  default: [m]\n"
    )
    outside = WORK / "outside"
    tries = []
    for name, resource_name, field, value, must in (
        ("io_manager.base_dir outside the home", "io_manager", "base_dir", str(outside / "artifacts"), "outside"),
        ("council.config_path=/etc/passwd", "council", "config_path", "/etc/passwd", "outside"),
        ("council file with api_key_env: HOME", "council", "config_path", str(foreign), "QUANDARY_KEY_"),
        ("council.log_path outside the home", "council", "log_path", str(outside / "log.sqlite"), "outside"),
        ("seed_catalog.catalog_path=/etc/hosts", "seed_catalog", "catalog_path", "/etc/hosts", "outside"),
    ):
        try:
            validate_run_config(job, {"resources": {resource_name: {"config": {field: value}}}})
            tries.append(Try(name, False, "accepted at launch"))
        except DagsterInvalidConfigError as exc:
            message = " ".join(" ".join(e.message for e in exc.errors).split()) if exc.errors else str(exc)
            tries.append(Try(name, must in message and not outside.exists(), message[-90:]))
    docs = (ROOT / "docs" / "operations.md").read_text()
    tries.append(
        Try(
            "docs say how to put a shared webserver behind authentication",
            "authenticat" in docs and "proxy" in docs,
            "docs/operations.md",
        )
    )
    return tries


# ------------------------------------------------------------------------------------------ item 8


def item8() -> list[Try]:
    tries = []
    for value in ("nan", "inf", "0", "-1"):
        rc, _, err = cli("audit", "sql", "SELECT 1", f"--timeout={value}")
        tries.append(Try(f"audit sql --timeout {value}", rc == 2 and "Traceback" not in err, err.strip()[:80]))
    t0 = time.monotonic()
    out = run_audit_query(
        "SELECT length(a) + length(b) + length(c) FROM (SELECT repeat('x', 1000000000) a, "
        "repeat('y', 1000000000) b, repeat('z', 1000000000) c)",
        timeout_s=30.0,
    )
    tries.append(
        Try(
            "audit sql 3 x repeat('x', 1e9)",
            not out.ok and out.kind == "too_large",
            f"{out.kind}, {time.monotonic() - t0:.1f} s",
        )
    )
    out = run_audit_query("SELECT sum(a % 7) FROM range(1000000000000) t(a)", timeout_s=1.0)
    tries.append(
        Try(
            "audit sql range(1e12), 1 s budget",
            not out.ok and out.kind == "timeout" and out.elapsed_s <= 1.5,
            f"{out.kind} after {out.elapsed_s:.2f} s",
        )
    )

    def busy_worker(pid):
        for child in _tree(pid)[1:]:
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes()
                stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if b"audit_worker" in cmd and int(stat[11]) + int(stat[12]) > 50:
                return True
        return False

    c = run_child(
        ["audit", "sql", "SELECT sum(a % 7) FROM range(1000000000000) t(a)", "--timeout", "600"],
        wall_s=240,
        interrupt_when=busy_worker,
    )
    err = lines(c.err)
    ok = c.rc == 130 and len(err) == 1 and err[0].startswith("interrupted") and c.seconds < 10
    tries.append(Try("audit sql range(1e12), Ctrl-C", ok, f"rc={c.rc} after {c.seconds:.1f} s; {err[:1]}"))
    return tries


# ------------------------------------------------------------------------------------------ item 9


def item9() -> list[Try]:
    class Verdict(BaseModel):
        verdict: str

    def member(url, **kw):
        return Member(
            **{
                **dict(
                    name="stub",
                    model="openai/stub",
                    api_base=url,
                    max_retries=0,
                    backoff_base_s=0.001,
                    backoff_max_s=0.01,
                    timeout_s=60.0,
                    structured_output="prompt",
                    repair=False,
                    max_tokens=256,
                ),
                **kw,
            }
        )

    def ask(m, text="Is this answerable?"):
        return Council("validators", [m], call_log()).ask(m.name, [{"role": "user", "content": text}], Verdict)

    tries = []
    with FaultStub(default="huge", huge_bytes=50 << 20) as stub:
        r, again = ask(member(stub.base_url)), ask(member(stub.base_url))
    tries.append(
        Try(
            "50 MB answer to max_tokens 256",
            not r.ok and r.failure == "oversize_answer" and not again.cached and stub.requests == 2,
            f"{r.failure}: {(r.error or '')[:70]}",
        )
    )
    for mode, failure, wrong in (
        ("badjson", "malformed_answer", "HTTP 500"),
        ("nochoices", "malformed_answer", "HTTP 500"),
        ("truncated", "truncated_answer", "cannot connect"),
    ):
        with FaultStub(default=mode) as stub:
            r = ask(member(stub.base_url), f"{mode}?")
        tries.append(
            Try(
                f"200 with a {mode} body",
                not r.ok and r.failure == failure and wrong not in (r.error or ""),
                f"{r.failure}: {(r.error or '')[:70]}",
            )
        )
    for value in ("2", "date"):
        if value == "date":  # made just before use: whole seconds, at least 2 s ahead
            value = formatdate(time.time() + 3, usegmt=True)
        with FaultStub(modes=[f"429-after:{value}"], default="ok") as stub:
            r = ask(member(stub.base_url, max_retries=2), f"retry {value}?")
        gap = stub.times[1] - stub.times[0] if len(stub.times) > 1 else 0.0
        tries.append(
            Try(f"Retry-After: {value if len(value) < 4 else 'HTTP-date'}", r.ok and gap >= 1.9, f"waited {gap:.2f} s")
        )
    tries.append(_corrupt_log_calls(member, ask))
    tries += _import_tries()
    return tries


def _corrupt_log_calls(member, ask) -> Try:
    path = HOME / "llm_calls.sqlite"
    with FaultStub(default="ok") as stub:
        for i in range(30):
            ask(member(stub.base_url), f"question {i} " + "pad " * 400)
    call_log().close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(path.read_bytes())
    for offset in range(2 * 4096, len(data) - 4096, 3 * 4096):
        data[offset : offset + 4096] = b"\xa5" * 4096
    path.write_bytes(bytes(data))
    c = run_child(["council", "calls"])
    err = lines(c.err)
    return Try(
        "council calls on a log with corrupt pages",
        c.rc not in (0, None) and len(err) == 1 and "Traceback" not in c.err,
        (err or [""])[0][:90],
    )


def _import_tries() -> list[Try]:
    tries = []
    deep = WORK / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    rc, _, err = cli("import", str(deep))
    tries.append(
        Try(
            "import JSON nested 100,000 deep",
            rc == 1 and len(lines(err)) == 1 and "Traceback" not in err,
            err.strip()[:80],
        )
    )
    empty = WORK / "empty.json"
    empty.write_text("[]")
    rc, _, err = cli("import", str(empty))
    tries.append(Try("import []", rc == 1 and "no records" in err, err.strip()[:80]))
    # memory must not grow with the file: the same records in a 2 MB and in a 20 MB file
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_import import make_records  # lazy: after the setup above it (environment, monkeypatch or sys.path)

    big = make_records(20.0)
    for n, name in ((len(big) // 10, "small.json"), (len(big), "large.json")):
        (WORK / name).write_text(json.dumps(big[:n], indent=2))
    runs = {}
    for name in ("small.json", "large.json"):
        env = {"QUANDARY_HOME": str(WORK / f"home-{name}")}
        runs[name] = run_child(["import", str(WORK / name)], env=env, wall_s=600)
    small, large = runs["small.json"], runs["large.json"]
    grew = large.peak_mb - small.peak_mb
    mb = (WORK / "large.json").stat().st_size / 1e6
    # streamed, the import's memory is a batch, not the file: it grows by far less than the file's size
    tries.append(
        Try(
            f"import of {mb:.0f} MB: memory does not grow with the file",
            large.rc == 0 and grew < mb / 2,
            f"peak {small.peak_mb:.0f} MB (2 MB file) -> {large.peak_mb:.0f} MB; "
            f"{len(big) / max(large.seconds, 1e-9):.0f} records/s",
        )
    )
    cut = (WORK / "large.json").read_bytes()
    (WORK / "cut.json").write_bytes(cut[: len(cut) // 2])
    rc, _, err = cli("import", str(WORK / "small.json"), str(WORK / "cut.json"))
    tries.append(
        Try(
            "import of a truncated file names byte and record, writes nothing",
            rc == 1
            and "byte" in err
            and "record" in err
            and str(WORK / "cut.json") in err
            and not (HOME / "artifacts" / "imported_dataset").exists(),
            err.strip()[-90:],
        )
    )
    return tries


from cli.run_output import first_failure  # noqa: E402
from pipelines.abiss.demo_db import write_demo_db  # noqa: E402
from resources.catalog import Catalog, SeedChangedError, check_seed_unchanged  # noqa: E402
from resources.llm import Council, call_log  # noqa: E402
from resources.llm.config import Member  # noqa: E402
from resources.sql.audit_runner import run_audit_query  # noqa: E402
from storage import artifacts  # noqa: E402
from storage.audit import open_audit  # noqa: E402
from storage.llm_log import CallLog, CallLogDamaged, CallLogError, CallRecord  # noqa: E402
from storage.paths import UnsafePathError, artifacts_dir  # noqa: E402
from tests.llm.fault_stub import FaultStub  # noqa: E402
from tests.storage.test_storage_faults import _inject_enospc_on_tmp_write  # noqa: E402

# ============================================================================ issue 34 (third round)
# Items 10-18 re-run the attacks of issue 34 (items 1 and 3-10; item 2 is the council's own probe).

SECRET = "probe-Secret-Value-9871"


def _abiss_file(name: str, **row) -> Path:
    from pipelines.abiss.outputs import to_abiss_records

    base = {
        "db_id": ["university"],
        "question": ["How many departments?"],
        "sql": ["SELECT COUNT(*) FROM departments"],
        "subcategory": ["answerable"],
        "style": ["formal"],
        "difficulty": ["simple"],
    }
    path = WORK / name
    path.write_text(json.dumps(to_abiss_records(pl.DataFrame({**base, **{k: [v] for k, v in row.items()}}))))
    return path


UPSERT_WRITER = """
import sys
import polars as pl
from storage.artifacts import KeyedRows
from storage.stores import artifact_store
i, rounds = int(sys.argv[1]), int(sys.argv[2])
sys.stdin.readline()
store = artifact_store()
for r in range(rounds):
    new = pl.DataFrame({"writer": [i] * 40, "n": [r * 40 + j for j in range(40)]})
    store.upsert(KeyedRows(new, ("writer", "n")), "ambitab_episodes", "race")
"""


def _race(env: dict, writers: int = 4, rounds: int = 4) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", UPSERT_WRITER, str(i), str(rounds)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdin=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.wait(600)


def item10() -> list[Try]:
    from storage.backends import LocalBackend
    from storage.stores import LocalArtifactStore, ObjectArtifactStore

    tries, expected = [], 4 * 4 * 40
    home = WORK / "race-home"
    _race({"QUANDARY_HOME": str(home), "QUANDARY_ARTIFACTS_URL": "", "QUANDARY_STATE_URL": ""})
    rows = LocalArtifactStore(home / "artifacts").read_latest("ambitab_episodes", "race").height
    tries.append(Try("4 writer processes x 4 upserts, local folder", rows == expected, f"{rows}/{expected} rows"))
    objects = WORK / "race-objects"
    _race({"QUANDARY_ARTIFACTS_URL": objects.as_uri(), "QUANDARY_STATE_URL": ""})
    rows = ObjectArtifactStore(LocalBackend(objects)).read_latest("ambitab_episodes", "race").height
    tries.append(Try("4 writer processes x 4 upserts, object store (CAS)", rows == expected, f"{rows}/{expected} rows"))
    return tries


def item11() -> list[Try]:
    good, tries = _abiss_file("target.json"), []
    for asset in ("interaction_conversations", "interaction_metrics", "aisql_verdicts", "ambitab_records", "my_table"):
        rc, _, err = cli("import", str(good), "--asset", asset)
        stored = (HOME / "artifacts" / asset).exists()
        tries.append(Try(f"import --asset {asset}", rc == 2 and len(lines(err)) == 1 and not stored, err.strip()[:90]))
    rc, out, _ = cli("import", str(good), "--asset", "imported_probe")
    tries.append(
        Try("import --asset imported_probe says which", rc == 0 and "import-only asset" in out, out.strip()[:90])
    )
    return tries


def item12() -> list[Try]:
    db, tries = demo_db(WORK / "t.sqlite"), []
    for value in ("1e308", "4e9", "86401"):
        for args in (
            ("sql", str(db), "SELECT 1"),
            ("equiv", str(db), "SELECT 1", "SELECT 1"),
            ("audit", "sql", "SELECT 1"),
            ("aisql", "run", "movie", "SELECT 1"),
        ):
            rc, _, err = cli(*args, "--timeout", value)
            ok = rc == 2 and "at most 86400" in err and "Traceback" not in err and "Overflow" not in err
            tries.append(Try(f"{' '.join(args[:2])} --timeout {value}", ok, err.strip().splitlines()[-1][:80]))
    return tries


def item13() -> list[Try]:
    from dagster import DagsterInvalidConfigError, validate_run_config

    from assets.aisql.assets import PREDICTION_VERDICTS
    from assets.aisql.card import EVALUATE_CARD
    from assets.definitions import MAIN_JOB, defs

    os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET
    cwd = os.getcwd()
    os.chdir(ROOT)  # the code server runs in the checkout: a relative secret would land there
    tries = []
    main_job = defs.resolve_job_def(MAIN_JOB)
    evaluate_job = defs.resolve_job_def(EVALUATE_CARD.name)
    env = {"env": "AWS_SECRET_ACCESS_KEY"}
    cases = [
        ("council.config_path: {env: SECRET}", main_job, {"resources": {"council": {"config": {"config_path": env}}}}),
        ("council.log_path: {env: SECRET}", main_job, {"resources": {"council": {"config": {"log_path": env}}}}),
        (
            "predictions_path: {env: SECRET}",
            evaluate_job,
            {"ops": {PREDICTION_VERDICTS: {"config": {"predictions_path": env}}}},
        ),
        (
            "predictions_path: /etc/shadow",
            evaluate_job,
            {"ops": {PREDICTION_VERDICTS: {"config": {"predictions_path": "/etc/shadow"}}}},
        ),
        ("aisql.data_root: /etc", evaluate_job, {"resources": {"aisql": {"config": {"data_root": "/etc"}}}}),
    ]
    try:
        for name, job, config in cases:
            try:
                validate_run_config(job, config)
                tries.append(Try(name, False, "accepted at launch"))
            except DagsterInvalidConfigError as exc:
                text = str(exc) + " ".join(e.message for e in exc.errors or [])
                ok = SECRET not in text and not (ROOT / SECRET).exists()
                tries.append(Try(name, ok, "refused; secret not echoed" if ok else "secret echoed or file created"))
    finally:
        os.chdir(cwd)
        os.environ.pop("AWS_SECRET_ACCESS_KEY", None)
    return tries


def item14() -> list[Try]:
    tries, root = [], WORK / "corrupt-arts"
    v1 = artifacts.write_version(pl.DataFrame({"a": [1]}), "dataset", "gone", root)
    v1.path.unlink()
    seen: list[str] = []
    artifacts.latest_paths_by_asset(root, on_damaged=seen.append)
    tries.append(
        Try("deleted latest Parquet is reported", any(v1.path.name in m for m in seen), (seen or ["-"])[0][:90])
    )
    a = artifacts.write_version(pl.DataFrame({"a": [1]}), "dataset", "stale", root)
    b = artifacts.write_version(pl.DataFrame({"a": [2]}), "dataset", "stale", root)
    (a.path.parent / "LATEST").write_text(a.path.name)
    seen.clear()
    got = artifacts.latest_path("dataset", "stale", root, on_recovered=seen.append)
    tries.append(Try("LATEST naming an older version heals", got == b.path and bool(seen), (seen or ["-"])[0][:90]))
    log_path = WORK / "calls-lost.sqlite"
    log = CallLog(log_path)
    log.record(CallRecord(call_id="k", status="ok", member="m", model="x", request={}, raw_response="{}", attempts=1))
    log.close()
    CallLog(log_path).close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{log_path}{suffix}").unlink(missing_ok=True)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CallLog(log_path).close()
    tries.append(Try("deleted call log warns", any("cached answer is lost" in str(w.message) for w in caught)))
    HOME.mkdir(parents=True, exist_ok=True)
    catalog = HOME / "catalog.json"
    saved = catalog.read_bytes() if catalog.exists() else None
    catalog.write_text('{"uni": {"db_id": "un')
    rc, _, err = cli("db", "list")
    tries.append(Try("truncated catalog.json", rc == 1 and len(lines(err)) == 1 and "catalog.json" in err, err[:90]))
    if saved is None:
        catalog.unlink()
    else:
        catalog.write_bytes(saved)
    return tries


def item15() -> list[Try]:
    tries = []
    path = _abiss_file("surrogate.json", question="How many \ud7ff?")
    path.write_text(path.read_text().replace("\\ud7ff", "\\ud800"))
    rc, _, err = cli("import", str(path))
    tries.append(Try("\\ud800 in a question", rc == 1 and "record 0" in err and len(lines(err)) == 1, err[:90]))
    for sql in ("DROP TABLE departments", "ATTACH 'x.db' AS x", "SELECT 1; SELECT 2", "PRAGMA writable_schema=1"):
        rc, _, err = cli("import", str(_abiss_file("gold.json", sql=sql)))
        tries.append(Try(f"gold {sql[:24]!r}", rc == 1 and "record 0" in err and len(lines(err)) == 1, err[:90]))
    return tries


def item16() -> list[Try]:
    db, tries = demo_db(WORK / "ids.sqlite"), []
    for bad in ("x" * 300, "../candidates", "..", "a/b"):
        rc, _, err = cli("db", "register", str(db), "--db-id", bad)
        tries.append(Try(f"--db-id {bad[:20]!r}", rc == 1 and "not a usable database id" in err, err.strip()[:90]))
    odd = WORK / "my-uni.sqlite"
    shutil.copyfile(db, odd)
    rc, out, _ = cli("db", "register", str(odd))
    tries.append(Try("derived id says it changed", rc == 0 and "was changed to the database id" in out, out[-90:]))
    return tries


def item17() -> list[Try]:
    from pipelines.ambitab.corpora import build_corpus
    from pipelines.ambitab.sources import SourceError
    from tests.ambitab.test_corrupt_sources import mirror

    if not SHARED.is_dir():
        return [Try("damaged sources", False, f"{SHARED} missing: not probed")]
    tries = []
    ambrosia, interact = (
        "ambrosia/ambrosia_resplit_test.jsonl",
        "bird_interact/bird_interact_conv/data/datasets/bird_interact_data.jsonl",
    )
    src = (SHARED / ambrosia).read_text().splitlines(keepends=True)
    row = json.loads(src[4])
    del row["question"]
    cases = [("ambrosia", ambrosia, src[:4] + [json.dumps(row) + "\n"] + src[5:], "line 5")]
    lines_ = (SHARED / interact).read_text().splitlines(keepends=True)
    cases.append(("bird_interact", interact, lines_[:3] + [lines_[1]] + lines_[3:], "duplicate"))
    k = next(i for i, line in enumerate(lines_) if json.loads(line).get("sol_sql"))
    bad = json.loads(lines_[k])
    bad["sol_sql"] = ["SELEC broken FRM nowhere"]
    cases.append(("bird_interact", interact, lines_[:k] + [json.dumps(bad) + "\n"] + lines_[k + 1 :], "does not parse"))
    spider = json.loads((SHARED / "spider/dev.json").read_text())
    del spider[3]["query"]
    for n, (corpus, rel, data, must) in enumerate(cases):
        root = mirror(SHARED, WORK / f"damaged{n}", rel, "".join(data).encode())
        try:
            build_corpus(corpus, root)
            tries.append(Try(f"{corpus}: {must}", False, "built green"))
        except SourceError as exc:
            tries.append(Try(f"{corpus}: {must}", must in str(exc), str(exc)[:90]))
    root = mirror(SHARED, WORK / "damaged-spider", "spider/dev.json", json.dumps(spider).encode())
    try:
        build_corpus("ambiqt", root)
        tries.append(Try("ambiqt: deleted field in spider dev.json", False, "built green"))
    except SourceError as exc:
        tries.append(Try("ambiqt: deleted field in spider dev.json", "dev.json item 4" in str(exc), str(exc)[:90]))
    return tries


def item18() -> list[Try]:
    from pipelines.ambitab.protocol.diagnostics import diagnostic
    from pipelines.ambitab.protocol.tables import NOT_ESTIMABLE, PRIVILEGED_MARK, table8_markdown

    frame = pl.DataFrame({"record_id": ["r1", "r2"], "seed": [0, 0], "avt_id": ["a", "b"], "x": [1.0, 0.0]})
    d = diagnostic(frame, frame.with_columns(pl.lit(0.0).alias("x")), "x", clusters={"a": "c", "b": "c"})
    row = {
        "kind": "main",
        "corpus": "c",
        "solver": "s",
        "oracle": "o",
        "asker": "peek",
        "prompt": "",
        "privileged": True,
        **{m: 100.0 for m in ("nodis", "asker_sr", "full_sr", "prec", "rec", "f1", "gain", "gap")},
        **{f"{m}_sd": None for m in ("nodis", "asker_sr", "full_sr", "prec", "rec", "f1", "gain", "gap")},
    }
    for k in ("d_j_resp", "d_j_full", "d_rec_none"):
        row.update({k: None, f"{k}_sd": None, f"{k}_lo": None, f"{k}_hi": None, f"{k}_clusters": 0})
    row.update(d_rec_spec=d["value"], d_rec_spec_sd=None, d_rec_spec_lo=d["ci"].low, d_rec_spec_hi=d["ci"].high)
    row["d_rec_spec_clusters"] = d["ci"].clusters
    table = table8_markdown(pl.DataFrame([row]))
    return [
        Try("privileged asker marked in Table 8", PRIVILEGED_MARK in table),
        Try("one-cluster ΔRec-spec interval", NOT_ESTIMABLE in table and d["ci"].low is None, table[-80:]),
    ]


# ------------------------------------------------------------------------- items 19-25: issue 45


def _launch_settings():
    """(job, section, node, setting, kind) for every path-, id- or number-valued setting of every job,
    enumerated from the Definitions (the shared rule's own classification when the code has one)."""
    from dagster._config import ConfigTypeKind

    from assets.definitions import defs

    try:
        from assets.shared.checked_config import setting_kind
    except ImportError:  # the code before issue 45: classify by the same names

        def setting_kind(n):
            return (
                "path"
                if n.endswith(("_path", "_dir", "_root"))
                else "id"
                if n.endswith("_id") or n == "split"
                else "model"
                if n == "model"
                else None
            )

    def walk(ct, path=()):
        if ConfigTypeKind.is_shape(ct.kind) or ct.kind == ConfigTypeKind.SELECTOR:
            for name, f in ct.fields.items():
                yield from walk(f.config_type, (*path, name))
        elif ct.kind in (ConfigTypeKind.ARRAY, ConfigTypeKind.NONEABLE):
            yield from walk(ct.inner_type, path)
        elif ct.kind == ConfigTypeKind.SCALAR_UNION:
            yield from walk(ct.scalar_type, path)
        else:
            yield path, ct

    seen = {}
    for job in defs.get_repository_def().get_all_jobs():
        if job.name.startswith("__"):
            continue
        for path, ct in walk(job.run_config_schema.config_type):
            if path[0] in ("ops", "resources") and len(path) == 4:
                kind = setting_kind(path[3]) or ("number" if ct.given_name == "Float" else None)
                if kind and (path[0], path[1], path[3]) not in seen:
                    seen[(path[0], path[1], path[3])] = (job, kind)
    return [(job, s, n, f, kind) for (s, n, f), (job, kind) in seen.items()]


def item19() -> list[Try]:
    from dagster import DagsterInvalidConfigError, validate_run_config

    os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET
    cwd = os.getcwd()
    os.chdir(ROOT)
    tries = []
    try:
        for job, section, node, field, kind in _launch_settings():
            fields = job.run_config_schema.config_type.fields[section].config_type.fields[node]
            shape = fields.config_type.fields["config"].config_type
            base = {
                f: (str(ROOT) if f.endswith(("_path", "_dir", "_root")) else "probe45")
                for f, fd in shape.fields.items()
                if fd.is_required and f != field
            }
            is_list = shape.fields[field].config_type.kind.name == "ARRAY"
            attacks = (
                [(float("nan"), "nan")]
                if kind == "number"
                else [({"env": "AWS_SECRET_ACCESS_KEY"}, "{env: SECRET}")]
                + [({"path": "/etc/shadow", "id": "../../../../../../tmp/x45", "model": "/etc"}[kind], "hostile")]
            )
            for value, label in attacks:
                config = {section: {node: {"config": {**base, field: [value] if is_list else value}}}}
                name = f"{job.name}: {node}.{field}: {label}"
                try:
                    validate_run_config(job, config)
                    tries.append(Try(name, False, "accepted at launch"))
                except DagsterInvalidConfigError as exc:
                    text = str(exc) + " ".join(e.message for e in exc.errors or [])
                    ok = SECRET not in text and field in text
                    tries.append(Try(name, ok, "refused" if ok else "secret echoed or refused for another reason"))
    finally:
        os.chdir(cwd)
        os.environ.pop("AWS_SECRET_ACCESS_KEY", None)
    return tries


def _shop(folder: Path) -> Path:
    from tests.benchmark_audit.conftest import write_shop

    if not (folder / "shop" / "shop.sqlite").exists():
        write_shop(folder / "shop" / "shop.sqlite")
    return folder


SLOW_SQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def item20() -> list[Try]:
    from tests.benchmark_audit.conftest import ITEMS as AUDIT_ITEMS

    dbs, home = _shop(WORK / "audit-dbs"), WORK / "audit-race"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QUANDARY_HOME": str(home), "DAGSTER_HOME": str(WORK / "race-dh")}
    files = []
    for tag in ("a", "b"):
        recs = [{"db_id": "shop", "question": f"{q} ({tag})", "SQL": s} for q, s, _, _ in AUDIT_ITEMS]
        recs += [{"db_id": "shop", "question": f"slow {k} ({tag})", "SQL": SLOW_SQL} for k in range(3)]
        (WORK / tag).mkdir(exist_ok=True)
        (WORK / tag / "dev.json").write_text(json.dumps(recs))
        files.append((WORK / tag / "dev.json", len(recs)))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLI, "audit", "benchmark", str(f), "--dbs", str(dbs), "--timeout", "1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for f, _ in files
    ]
    codes = [p.wait(900) for p in procs]
    from storage.stores import LocalArtifactStore

    stored = LocalArtifactStore(home / "artifacts").read_latest("benchmark_audit_findings", "dev.shop")
    import hashlib

    kept = [
        stored.filter(pl.col("benchmark_sha256") == hashlib.sha256(f.read_bytes()).hexdigest()).height for f, _ in files
    ]
    want = [n for _, n in files]
    return [
        Try(
            "two audits at once, one partition, two files",
            codes == [0, 0] and kept == want,
            f"rows kept {kept} of {want}",
        )
    ]


def _hostile_audit_files(folder: Path):
    folder.mkdir(exist_ok=True)
    ok = {"db_id": "shop", "question": "How many products?", "SQL": "SELECT count(*) FROM product"}
    nested = "[" * 100_000 + "]" * 100_000

    def w(name, text):
        (folder / name).write_text(text)
        return str(folder / name)

    yield "nested file", w("deep.json", nested)
    yield "nested value", w("deepv.json", json.dumps([ok])[:-2] + ', "x": ' + nested + "}]")
    yield "nested JSONL line", w("deep.jsonl", json.dumps(ok) + '\n{"x": ' + nested + "}\n")
    yield "300-char db_id", w("db.json", json.dumps([{**ok, "db_id": "d" * 300}]))
    yield "100 MB question", w("q.json", json.dumps([{**ok, "question": "q" * 100_000_000}]))
    yield (
        "1 MB gold SQL",
        w(
            "sql.json",
            json.dumps([{**ok, "SQL": "SELECT 1 FROM product WHERE " + " OR ".join(["unit_price > 1"] * 70_000)}]),
        ),
    )
    yield (
        "gold SQL nested 60 parentheses",
        w("dsql.json", json.dumps([{**ok, "SQL": "SELECT " + "(" * 60 + "1" + ")" * 60}])),
    )
    yield "lone surrogate", w("s.json", '[{"db_id": "shop", "question": "q\\ud800", "SQL": "SELECT 1"}]')
    yield "400k items", w("n.json", json.dumps([ok] * 400_000))
    yield "/dev/zero", "/dev/zero"
    fifo = folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    yield "FIFO", str(fifo)


def item21() -> list[Try]:
    dbs, tries = _shop(WORK / "audit-dbs"), []
    for name, path in _hostile_audit_files(WORK / "hostile-audit"):
        child = run_child(["audit", "benchmark", path, "--dbs", str(dbs), "--timeout", "10"], wall_s=120)
        ok = child.rc == 2 and len(lines(child.err)) == 1 and "Traceback" not in child.err
        tries.append(
            Try(name, ok, f"rc {child.rc}, {child.seconds:.1f} s, {child.peak_mb:.0f} MB: {child.err.strip()[:70]}")
        )
    slow = WORK / "slow.json"
    slow.write_text(json.dumps([{"db_id": "shop", "question": f"q{i}", "SQL": SLOW_SQL} for i in range(3)]))
    env = {"QUANDARY_PROGRESS": "1", "DAGSTER_HOME": str(WORK / "ctrl-c-dh")}
    child = run_child(
        ["audit", "benchmark", str(slow), "--dbs", str(dbs), "--timeout", "600"],
        env=env,
        wall_s=300,
        interrupt_when=lambda pid: any(
            (Path(f"/proc/{p}/cmdline").exists() and b"sql" in Path(f"/proc/{p}/cmdline").read_bytes())
            for p in _tree(pid)[1:]
        ),
    )
    tries.append(
        Try(
            "Ctrl-C during a 600 s gold query",
            child.rc == 130 and child.seconds < 15,
            f"rc {child.rc} after {child.seconds:.1f} s",
        )
    )
    return tries


def item22() -> list[Try]:
    tries = []
    for sql in ("SELECT * FROM t; DROP TABLE t", "SELECT * FROM t -- x\n; DELETE FROM departments"):
        rc, _, err = cli("import", str(_abiss_file("gold45.json", sql=sql)))
        tries.append(Try(f"gold {sql[:30]!r}", rc == 1 and "2 statements" in err and len(lines(err)) == 1, err[:90]))
    return tries


def item23() -> list[Try]:
    dbs, folder = _shop(WORK / "audit-dbs"), WORK / "fix"
    folder.mkdir(exist_ok=True)
    gold = "SELECT product_name FROM product WHERE category = 'Meat'"
    bench = folder / "spider_dev.json"
    bench.write_text(
        json.dumps(
            [{"db_id": "shop", "question": "Meat?", "query": gold, "query_toks": gold.split(), "sql": {"from": {}}}]
        )
    )
    cli("audit", "benchmark", str(bench), "--dbs", str(dbs))
    review = folder / "r.jsonl"
    cli("audit", "benchmark-export", str(bench), "--out", str(review))
    row = json.loads(review.read_text().splitlines()[0])
    tries = []
    for fixed, must_refuse in (
        ("SELEC broken garbage", True),
        ("SELECT product_name FROM product WHERE category = 'Veg'", False),
    ):
        review.write_text(json.dumps({**row, "accept": True, "fixed_sql": fixed}) + "\n")
        out = folder / "fixed.json"
        out.unlink(missing_ok=True)
        rc, _, err = cli(
            "audit",
            "benchmark-fix",
            str(bench),
            "--review",
            str(review),
            "--out",
            str(out),
        )
        if must_refuse:
            tries.append(
                Try(
                    "accepted fixed_sql 'SELEC broken garbage'",
                    rc == 2 and not out.exists(),
                    (err or f"rc {rc}, written").strip()[:90],
                )
            )
        else:
            rec = json.loads(out.read_text())[0] if out.exists() else {}
            stale = [k for k in ("query_toks", "sql") if k in rec]
            tries.append(Try("fixed query leaves no stale query_toks / sql", rc == 0 and not stale, f"stale: {stale}"))
    return tries


def item24() -> list[Try]:
    mount = WORK / "tiny-disk"
    mount.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        return [Try("full disk", False, "cannot mount a tmpfs here: not probed")]
    tries = []
    try:
        from tests.storage.test_full_disk_cli import _fill

        gold = (SHARED / "sembench/files/movie/query/bigquery/Q3.sql").read_text()
        preds = WORK / "p45.jsonl"
        preds.write_text(
            json.dumps({"id": 1, "scenario": "movie", "question": "q", "gold_sql": gold, "predicted_sql": gold}) + "\n"
        )
        big = WORK / "imp45.json"
        big.write_text(
            json.dumps(
                [json.loads(_abiss_file("one.json").read_text())[0] | {"question": f"q {i}"} for i in range(4000)]
            )
        )
        env = {"QUANDARY_HOME": str(mount / "home"), "DAGSTER_HOME": str(WORK / "disk-dh")}
        for name, args, leave in (
            ("aisql evaluate, disk full", ["aisql", "evaluate", str(preds), "--data", str(SHARED)], 0),
            ("aisql evaluate, scenario database", ["aisql", "evaluate", str(preds), "--data", str(SHARED)], 16),
            ("import, disk full", ["import", str(big)], 0),
            ("import, staging", ["import", str(big)], 64),
        ):
            _fill(mount, leave)
            child = run_child(args, env=env, wall_s=300)
            text = child.out + child.err
            left = [p.name for p in mount.rglob("*") if ".tmp" in p.name or p.name.startswith(".import-staging")]
            ok = child.rc not in (0, None) and "Traceback" not in text and "ENOSPC" in text and not left
            tries.append(
                Try(
                    name, ok, f"rc {child.rc}, left {left[:2]}: {lines(child.err)[-1][:60] if lines(child.err) else ''}"
                )
            )
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    return tries


def item25() -> list[Try]:
    import warnings

    tries = []
    for how in ("0 bytes", "deleted"):
        home = WORK / f"lost-{how[0]}"
        log_path = home / "llm_calls.sqlite"
        home.mkdir(exist_ok=True)
        log = CallLog(log_path)  # one run's log: written once, never reopened
        log.record(
            CallRecord(call_id="k", status="ok", member="m", model="x", request={}, raw_response="{}", attempts=1)
        )
        log.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{log_path}{suffix}").unlink(missing_ok=True)
        log_path.write_bytes(b"") if how == "0 bytes" else log_path.unlink()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            CallLog(log_path).close()
        tries.append(
            Try(f"call log {how} after one run warns", any("cached answer is lost" in str(w.message) for w in caught))
        )
        log_path.write_bytes(b"") if how == "0 bytes" else log_path.unlink(missing_ok=True)
        seen: list[str] = []
        con = open_audit(home / "artifacts", log_path, warn=seen.append)
        views = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        tries.append(
            Try(
                f"llm_calls view, log {how}",
                "llm_calls" in views and any("held 1 calls" in m for m in seen),
                f"views {views[:3]}, warnings {len(seen)}",
            )
        )
    return tries


def item26() -> list[Try]:
    from dagster import DagsterInstance

    gold = (SHARED / "sembench/files/movie/query/bigquery/Q3.sql").read_text()
    preds = WORK / "kill9.jsonl"
    preds.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "scenario": "movie",
                    "question": "q",
                    "gold_sql": gold,
                    "predicted_sql": gold.replace("taken_3", f"taken_{i % 7}"),
                }
            )
            + "\n"
            for i in range(200)
        )
    )
    home, dh = WORK / "kill9-home", WORK / "kill9-dh"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QUANDARY_HOME": str(home), "DAGSTER_HOME": str(dh)}
    args = [sys.executable, "-c", CLI, "aisql", "evaluate", str(preds), "--data", str(SHARED)]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    progressed, db_at = False, None
    db = home / "aisql" / "databases" / "sembench_movie.duckdb"
    while proc.poll() is None and time.monotonic() - t0 < 300:  # until some verdicts are judged
        journals = list((home / "journals").rglob("*.jsonl")) if (home / "journals").is_dir() else []
        db_at = db_at or (time.monotonic() if db.exists() else None)
        # a journal (this code) or, for code without one, judging under way for 8 s
        if journals or (db_at and time.monotonic() - db_at > 8):
            progressed = True
            break
        time.sleep(0.2)  # polling the state folder, not waiting for a result
    proc.kill()
    proc.wait()
    again = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    import re

    m = re.search(r"reused (\d+) stored verdicts, judged (\d+)", again.stdout)
    with DagsterInstance.from_config(str(dh)) as instance:
        statuses = sorted(r.status.name for r in instance.get_runs())
    return [
        Try(
            "resume after kill -9 reuses finished verdicts",
            bool(m) and progressed and int(m.group(1)) > 0,
            m.group(0) if m else again.stderr.strip()[-80:],
        ),
        Try("killed run not left STARTED", "STARTED" not in statuses, f"statuses {statuses}"),
    ]


ITEMS = {
    1: ("import writes outside its asset", item1),
    2: ("AI-operator SQL outside the sandbox", item2),
    3: ("relative database paths", item3),
    4: ("disk full / read-only storage", item4),
    5: ("lost LATEST + versions.jsonl", item5),
    6: ("seed edited before a rerun", item6),
    7: ("launchpad run config", item7),
    8: ("audit sql bounds", item8),
    9: ("answers, bodies, Retry-After, corrupt log, import", item9),
    10: ("#34.1 concurrent keyed writers", item10),
    11: ("#34.3 import into another job's asset", item11),
    12: ("#34.4 --timeout beyond the maximum", item12),
    13: ("#34.5 launchpad env values and paths", item13),
    14: ("#34.6 corrupt state served quietly", item14),
    15: ("#34.7 unbounded import records", item15),
    16: ("#34.8 database ids", item16),
    17: ("#34.9 damaged AmbiTab sources", item17),
    18: ("#34.10 privileged / one-cluster results", item18),
    19: ("#45.1 launchpad: every job's paths, ids, numbers", item19),
    20: ("#45.2 concurrent audits, one partition", item20),
    21: ("#45.3 audit inputs, Ctrl-C", item21),
    22: ("#45.5 multi-statement gold at import", item22),
    23: ("#45.5 benchmark-fix validation", item23),
    24: ("#45.5 full disk (tmpfs)", item24),
    25: ("#45.5 call log emptied after one run", item25),
    26: ("#45.5 kill -9 during aisql evaluate", item26),
}
# seconds-long: what `make test` runs (tests/bench smoke); the rest start processes or build databases
SMOKE_ITEMS = (13, 15, 19, 22, 25)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", default=",".join(map(str, ITEMS)), help="comma-separated item numbers")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--verbose", action="store_true", help="print every try")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a try failed (`make bench` runs it without)")
    ap.add_argument("--smoke", action="store_true", help=f"seconds: items {SMOKE_ITEMS} only, strict")
    args = ap.parse_args()
    if args.smoke:
        args.items, args.strict = ",".join(map(str, SMOKE_ITEMS)), True
    rows, t0 = [], time.monotonic()
    for n in (int(x) for x in args.items.split(",")):
        title, probe = ITEMS[n]
        started = time.monotonic()
        try:
            tries = probe()
        except Exception as exc:  # a probe that breaks is a failed row, not a crashed table
            traceback.print_exc()
            tries = [Try("probe", False, f"{type(exc).__name__}: {exc}"[:120])]
        failed = [t for t in tries if not t.held]
        note = "; ".join(f"{t.name}: {t.note}" for t in failed[:2]) or f"all held ({time.monotonic() - started:.0f} s)"
        rows.append((f"{n}. {title}", len(tries), len(tries) - len(failed), len(failed), note))
        if args.verbose:
            for t in tries:
                print(f"  [{'held' if t.held else 'FAIL'}] {n}: {t.name} — {t.note}", flush=True)
        print(f"item {n}: {len(tries) - len(failed)}/{len(tries)} held", file=sys.stderr, flush=True)
    print("\n| item | tries | held | failed | note |\n|---|---|---|---|---|")
    for item, tries, held, failed, note in rows:
        print(f"| {item} | {tries} | {held} | {failed} | {note.replace('|', '/')} |")
    total = sum(r[1] for r in rows)
    print(
        f"\n{total} tries, {sum(r[2] for r in rows)} held, {sum(r[3] for r in rows)} failed "
        f"in {time.monotonic() - t0:.0f} s (load average {os.getloadavg()[0]:.1f}); scratch {WORK}"
    )
    if not args.keep:
        shutil.rmtree(WORK, ignore_errors=True)
    return 1 if args.strict and any(r[3] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
