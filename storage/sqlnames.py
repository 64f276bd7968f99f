"""One SQL identifier quoting for every layer (storage is the lowest, so the audit catalog can use it).

Double quotes with embedded quotes doubled: valid for SQLite and DuckDB, and safe for any table or
column name a benchmark database holds (spaces, quotes, keywords).
"""


def quote_ident(name: str) -> str:
    """The name in double quotes, embedded double quotes doubled."""
    return '"' + str(name).replace('"', '""') + '"'
