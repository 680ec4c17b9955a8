"""A loopback TCP relay that records every byte a client sends to the
server, so a test can inspect exactly what leaves the annotator's device
(the Python counterpart of tests/support/tcp_proxy.c)."""

from __future__ import annotations

import json
import re
import socket
import threading
from typing import List


class RecordingRelay:
    """Relays 127.0.0.1:<port> -> 127.0.0.1:target_port; captured holds the
    client-to-server bytes of every connection, in arrival order."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listen = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listen.bind(("127.0.0.1", 0))
        self._listen.listen(16)
        self.port = self._listen.getsockname()[1]
        self._lock = threading.Lock()
        self._captured = bytearray()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def captured(self) -> bytes:
        with self._lock:
            return bytes(self._captured)

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listen.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record:
                    with self._lock:
                        self._captured += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self._listen.close()


def request_bodies(captured: bytes, path: str) -> List[dict]:
    """The JSON bodies of the POST requests to path in the captured bytes
    (Content-Length framed, as libcurl sends them)."""
    out = []
    pos = 0
    head = f"POST {path} HTTP/1.1\r\n".encode()
    while True:
        i = captured.find(head, pos)
        if i < 0:
            return out
        end = captured.find(b"\r\n\r\n", i)
        headers = captured[i:end].decode("latin-1")
        m = re.search(r"(?i)^content-length:\s*(\d+)", headers, re.M)
        length = int(m.group(1)) if m else 0
        body = captured[end + 4 : end + 4 + length]
        out.append(json.loads(body))
        pos = end + 4 + length
