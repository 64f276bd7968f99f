"""Whether a statement parses as SQLite, by SQLite's own parser (issue 23 item 9).

sqlglot needs about a millisecond per statement, which made the syntax check of every imported
gold query most of a 56 MB import's time. SQLite parses the same statement in tens of
microseconds: it is compiled with ``EXPLAIN`` (never run) on an empty in-memory database whose
authorizer allows nothing but reads, so a missing table or column (name resolution, after the
parse) still counts as parsed and no statement can attach, write or change a setting.
"""

from __future__ import annotations

import re
import sqlite3
import threading

_ALLOWED = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE})
# name resolution runs after the whole statement has parsed: these mean "parsed, names unknown"
_RESOLVED_AFTER_PARSE = re.compile(r"no such (table|column|function)\b")
_local = threading.local()


def _connection() -> sqlite3.Connection:
    con = getattr(_local, "con", None)
    if con is None:
        con = sqlite3.connect(":memory:")
        con.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY)
        _local.con = con
    return con


def has_second_statement(sql: str) -> bool:
    """Whether anything but blanks, ``;`` and comments follows the first ``;`` outside quotes and
    comments. SQLite compiles only the first statement (and a missing table there reads as
    "parsed"), so ``SELECT * FROM t; DROP TABLE t`` must be caught here (issue 45 item 5)."""
    i, n, ended = 0, len(sql), False
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif ch in " \t\r\n\f;":
            ended = ended or ch == ";"
            i += 1
        elif ended:
            return True
        elif ch in "'\"`[":
            j = sql.find("]" if ch == "[" else ch, i + 1)
            i = n if j < 0 else j + 1  # a doubled quote ('it''s') reads as two quoted runs: same result
        else:
            i += 1
    return False


def sqlite_parses(sql: str) -> bool:
    """True if SQLite's parser accepts ``sql`` as one read-only statement; False when it refuses it
    or cannot tell (a write, a pragma, several statements): the caller then decides another way."""
    if has_second_statement(sql):
        return False
    try:
        _connection().execute("EXPLAIN " + sql).fetchall()
    except sqlite3.Error as exc:
        return bool(_RESOLVED_AFTER_PARSE.match(str(exc)))
    except (ValueError, OverflowError):  # NUL characters, several statements, a statement too long
        return False
    return True
