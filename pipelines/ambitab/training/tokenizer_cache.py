"""A GGUF model's tokenizer kept as a ``save_pretrained`` folder, so a process reads it in ~0.3 s
instead of rebuilding it from the GGUF file in ~3.2 s of CPU (transformers converts the GGUF
vocabulary and merges into a fast tokenizer every time). Every trainer process, bench and CLI call
that loads ``embedded:smollm2`` paid that (#44).

The folder lives under ``$QUANDARY_TOKENIZER_CACHE`` (default: ``$XDG_CACHE_HOME/quandary/tokenizers``,
``~/.cache/...`` without it; ``off`` turns the cache off), named by the GGUF file's identity (real
path, size, modification time) and the transformers and tokenizers versions that converted it: a
changed file or library makes a new entry, never a stale read. An entry is written to a private
folder and renamed into place, so a reader sees a whole entry or none, and two processes filling the
same entry at once both succeed (the second rename loses and its copy is dropped). A cache that
cannot be written or read costs only the time: the tokenizer is then built from the GGUF file.
"""

import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path

CACHE_ENV = "QUANDARY_TOKENIZER_CACHE"


def cache_root() -> Path | None:
    configured = os.environ.get(CACHE_ENV, "")
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "quandary" / "tokenizers"


def entry_name(gguf_path: Path) -> str:
    import tokenizers
    import transformers

    st = gguf_path.stat()
    identity = (
        f"{gguf_path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{transformers.__version__}|{tokenizers.__version__}"
    )
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


def load_gguf_tokenizer(folder: str, gguf_file: str):
    """The tokenizer of ``folder/gguf_file``, from the cache when an entry exists, else built from the
    GGUF file and stored for the next process."""
    from transformers import AutoTokenizer

    root = cache_root()
    if root is None:
        return AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    entry = root / entry_name(Path(folder) / gguf_file)
    if entry.is_dir():
        try:
            return AutoTokenizer.from_pretrained(str(entry))
        except Exception as exc:  # noqa: BLE001 (tokenizers raises plain Exception on a damaged file)
            # an unreadable entry: said in one line, then rebuilt from the GGUF file and replaced
            warnings.warn(
                f"tokenizer cache entry {entry} is unreadable ({type(exc).__name__}): converting "
                f"{gguf_file} again and replacing it",
                stacklevel=2,
            )
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    _store(tok, root, entry)
    return tok


def _store(tok, root: Path, entry: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=root))
    except OSError:
        return  # no cache here (read-only home, full disk): the next process converts again
    try:
        tok.save_pretrained(str(tmp))
        if entry.is_dir():  # an unreadable entry found above: make room for the new one
            shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)  # atomic; fails when another process placed the entry first
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
