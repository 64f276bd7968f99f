"""Servers a distributed-mode test starts for itself, on loopback: PostgreSQL (Debian's server
binaries, initdb + pg_ctl in a temp folder, as a non-root user when the tests run as root) and an
S3-compatible server (moto's). Each waits on readiness (pg_ctl -w, a polled HTTP probe), never a sleep.
"""

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass

import pytest

from tests.waiting import wait_until

PG_USER = "postgres"  # the cluster's superuser name (initdb -U)
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def pg_bindir() -> str | None:
    """The folder of PostgreSQL's server binaries (initdb, pg_ctl, postgres), or None."""
    candidates = []
    if shutil.which("pg_config"):
        try:
            candidates.append(
                subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30).stdout.strip()
            )
        except (OSError, subprocess.SubprocessError):
            pass
    if shutil.which("initdb"):
        candidates.append(os.path.dirname(os.path.realpath(shutil.which("initdb"))))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for d in candidates:
        if d and all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


def require_pg_bindir() -> str:
    d = pg_bindir()
    if d is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: `make test` installs "
            "Debian's postgresql package where apt is available"
        )
    return d


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> list[str]:
    """PostgreSQL refuses to run as root: run its binaries as `nobody` when we are root."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("running as root without `runuser`: cannot start PostgreSQL as a non-root user")
    return [runuser, "-u", "nobody", "--"]


@dataclass
class Postgres:
    port: int
    sockdir: str

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg2://{PG_USER}@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        import psycopg2  # lazy: only for the PostgreSQL tests

        con = psycopg2.connect(host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres")
        con.autocommit = True
        try:
            con.cursor().execute(f'CREATE DATABASE "{name}"')
        finally:
            con.close()
        return self.url(name)


@contextlib.contextmanager
def postgres_server():
    bindir = require_pg_bindir()
    prefix = _as_server_user()
    base = tempfile.mkdtemp(prefix="quandary-pg-")  # directly under /tmp: `nobody` can reach it
    if prefix:
        shutil.chown(base, "nobody")
    data, log = os.path.join(base, "data"), os.path.join(base, "server.log")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    try:
        subprocess.run(
            [
                *prefix,
                f"{bindir}/initdb",
                "-D",
                data,
                "-U",
                PG_USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            env=env,
            timeout=300,
            cwd=base,
        )
        for _attempt in range(3):
            port = free_port()
            started = subprocess.run(
                [
                    *prefix,
                    f"{bindir}/pg_ctl",
                    "-D",
                    data,
                    "-l",
                    log,
                    "-w",
                    "-t",
                    "120",
                    "-o",
                    f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off",
                    "start",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                cwd=base,
            )
            if started.returncode == 0:
                break
        else:
            with open(log, errors="replace") as fh:
                raise RuntimeError(f"PostgreSQL did not start: {started.stderr}\n{fh.read()[-2000:]}")
        yield Postgres(port, base)
    finally:
        if os.path.isdir(data):
            subprocess.run(
                [*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                capture_output=True,
                env=env,
                timeout=120,
                cwd=base,
            )
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class S3Server:
    endpoint: str

    def env(self) -> dict:
        return {**S3_KEYS, "QUANDARY_S3_ENDPOINT_URL": self.endpoint}

    def client(self):
        import boto3  # lazy: only for the bucket tests, slow to import

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            **{
                "aws_access_key_id": S3_KEYS["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": S3_KEYS["AWS_SECRET_ACCESS_KEY"],
                "region_name": S3_KEYS["AWS_DEFAULT_REGION"],
            },
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"


def _responds(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status < 500
    except OSError:
        return False


@contextlib.contextmanager
def s3_server():
    pytest.importorskip("moto.server", reason="moto[server] is not installed (the test extras install it)")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: _responds(endpoint + "/moto-api/"), 120, "moto S3 server ready", alive=lambda: proc.poll() is None
        )
        yield S3Server(endpoint)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
