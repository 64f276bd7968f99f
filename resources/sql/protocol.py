"""The wire protocol between the parent and a sandbox worker: 8-byte big-endian length + pickle.

The parent first reads one ready message ``{"ready": True, "limit": bytes}``; then each request gets
one answer, a pickled ``QueryResult`` / ``QueryFailure``:

* ``(path, sql, timeout_s, max_rows, max_bytes, digest_beyond_cap)``: one query on a fresh
  connection (the pool);
* ``{"session": (path, threads, udfs), "sql", "timeout_s", "max_rows", "max_bytes"}``: one query on
  the worker's session connection with forwarding UDFs (:class:`resources.sql.session.SandboxSession`).
  While it runs, the worker may send any number of ``{"callback": udf_name, "args": [column, ...]}``;
  each gets one reply ``{"values": [...]}`` or ``{"error": "..."}`` before the final answer.

EOF on stdin ends the worker."""

import pickle
import struct

HEADER = struct.Struct(">Q")


class MessageTooLarge(ValueError):
    """A message over the byte limit its sender or receiver set; nothing of it was sent or kept."""


def read_msg(stream):
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (n,) = HEADER.unpack(head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def write_msg(stream, obj, limit: int | None = None) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if limit is not None and len(data) > limit:
        raise MessageTooLarge(f"{len(data) >> 20} MB over the {limit >> 20} MB limit")
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()
