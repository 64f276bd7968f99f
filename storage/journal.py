"""Rows a step has finished, kept on disk as it goes, so a step killed before it stores its output
(``kill -9``, a crash, a power cut) is resumed without redoing them (issue 45 item 5).

    $QUANDARY_HOME/journals/<asset>/<key>.jsonl     one JSON row a line, appended and flushed

The step reads the journal's rows as already done, appends each batch it finishes, and clears the
journal once its output is stored. A torn last line (the kill came mid-write) is ignored; a journal
only ever holds rows the step computed itself, keyed as its output is, so reusing them is safe.
"""

import json
import os
from pathlib import Path

from storage.faults import storage_error
from storage.paths import path_segment, quandary_home


class RowJournal:
    def __init__(self, asset: str, key: str):
        self.path = quandary_home() / "journals" / path_segment(asset, "asset") / f"{path_segment(key, 'key')}.jsonl"

    def rows(self) -> list[dict]:
        """The rows finished before (none when there is no journal)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError):
            return []  # unreadable: redo the work rather than trust it
        out = []
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line torn by the kill
            if isinstance(row, dict):
                out.append(row)
        return out

    def append(self, rows: list[dict]) -> None:
        if not rows:
            return
        data = "".join(json.dumps(r, default=str, ensure_ascii=False) + "\n" for r in rows)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise storage_error(exc, self.path, "cannot write the step's journal") from exc

    def clear(self) -> None:
        Path(self.path).unlink(missing_ok=True)
