"""The wire protocol between the pool and a sandbox worker: 8-byte big-endian length + pickle.

The parent first reads one ready message ``{"ready": True, "limit": bytes}``; then each request
``(path, sql, timeout_s, max_rows, max_bytes)`` gets one pickled ``QueryResult`` / ``QueryFailure``.
EOF on stdin ends the worker."""

import pickle
import struct


HEADER = struct.Struct(">Q")


def read_msg(stream):
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (n,) = HEADER.unpack(head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def write_msg(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()
