"""Fixtures of the Python binding's tests: a real ldpref-server on 127.0.0.1
with a database in a temporary directory (as tests/support/server_proc.c
does for the C tests), the package from this checkout, and helpers that
enroll annotators and load tasks.

Binaries are taken from $LDPREF_BUILD (default build) of this checkout.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / os.environ.get("LDPREF_BUILD", "build")
sys.path.insert(0, str(ROOT / "client" / "python"))

import ldpref  # noqa: E402


def bin_path(name: str) -> str:
    return str(BUILD / name)


class Server:
    """An ldpref-server child process; port and first operator token read
    from its stdout, stderr kept in dir/server.log."""

    def __init__(self, directory: Path, extra: Optional[List[str]] = None) -> None:
        self.dir = directory
        self.db = directory / "ldpref.db"
        self.log = directory / "server.log"
        argv = [bin_path("ldpref-server"), "--port", "0", "--db", str(self.db), "--threads", "2"]
        argv += ["--score-rate", "0", "--enroll-rate", "0", "--next-rate", "0"]
        argv += extra or []
        self._log = open(self.log, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log)
        self.token = ""
        self.port = 0
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            if line.startswith("operator token: "):
                self.token = line.split()[2]
            m = re.search(r"listening on https?://[^ ]*:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port == 0:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"ldpref-server did not start; see {self.log}")
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("server"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def admin(server: Server) -> Iterator[ldpref.Admin]:
    with ldpref.Admin(server.url, server.token) as a:
        yield a


_names = itertools.count(1)


def unique(prefix: str) -> str:
    """A name no other test uses (campaigns, task ids, prompts)."""
    return f"{prefix}{os.getpid()}x{next(_names)}"


def load_tasks(admin: ldpref.Admin, n: int, campaign: Optional[str] = None, tag: str = "") -> List[int]:
    """Loads n distinct tasks; returns their ids."""
    assert n > 0
    tag = tag or unique("t")
    rows = [
        {
            "id": f"{tag}-{i}",
            "prompt": f"Question {tag} number {i}: which answer is kinder?",
            "responses": [f"First answer {tag} {i}.", f"Second answer {tag} {i}, longer."],
        }
        for i in range(n)
    ]
    first, last = admin.upload_tasks(rows, campaign)["task_ids"]  # the range loaded
    return list(range(first, last + 1))


def annotator(
    server: Server,
    admin: ldpref.Admin,
    directory: Path,
    campaign: Optional[str] = None,
    url: Optional[str] = None,
    **options,
) -> ldpref.Client:
    """A new annotator: key pair in directory, enrolled in campaign."""
    key = directory / f"{unique('ann')}.key"
    ldpref.keygen(key)
    c = ldpref.Client(url or server.url, key, **options)
    c.enroll(admin.enrollment_tokens(1, campaign)[0])
    return c


def cli(server: Server, *args: str, env: Optional[Dict[str, str]] = None, stdin: str = "") -> subprocess.CompletedProcess:
    """Runs the ldpref CLI against server."""
    e = dict(os.environ)
    e.update({"LDPREF_SERVER": server.url})
    e.update(env or {})
    return subprocess.run(
        [bin_path("ldpref"), *args], input=stdin, capture_output=True, text=True, env=e, check=False
    )
