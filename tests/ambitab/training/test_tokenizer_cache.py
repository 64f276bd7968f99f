"""The GGUF tokenizer cache (pipelines/ambitab/training/tokenizer_cache.py): a tokenizer read back
from its entry encodes every text and chat exactly as one converted from the GGUF file, an entry is
whole or absent, and a cache that cannot be used costs time, never a wrong or failed load."""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.ambitab.training import tokenizer_cache
from pipelines.ambitab.training.presets import resolve_model

CHATS = [
    [{"role": "user", "content": "Which singers are older than 30?"}],
    [
        {"role": "system", "content": "You ask one clarification question or answer."},
        {"role": "user", "content": "Show the top items of kind 3."},
        {"role": "assistant", "content": '{"action": "ask", "question": "Top by what?"}'},
        {"role": "user", "content": "By price, ünïcode ✓, tabs\tand\nnewlines."},
    ],
]


@pytest.fixture(scope="module")
def source():
    return resolve_model("embedded:smollm2")


@pytest.fixture(scope="module")
def from_gguf(source):
    """The reference: converted from the GGUF file, no cache involved (the one real conversion here)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)


class Conversions:
    """AutoTokenizer.from_pretrained with a GGUF file answers the reference's conversion (counted)
    instead of converting again (3.5 s each); reading a folder stays real."""

    def __init__(self, mp: pytest.MonkeyPatch, reference):
        from transformers import AutoTokenizer

        self.count = 0
        real = AutoTokenizer.from_pretrained

        def from_pretrained(path, *args, **kwargs):
            if kwargs.get("gguf_file"):
                self.count += 1
                return reference
            return real(path, *args, **kwargs)

        mp.setattr(AutoTokenizer, "from_pretrained", from_pretrained)


@pytest.fixture
def conversions(monkeypatch, from_gguf):
    return Conversions(monkeypatch, from_gguf)


@pytest.fixture(scope="module")
def cached(source, from_gguf, tmp_path_factory):
    """Loaded twice through an empty cache: the first load converts and fills the entry, the second
    reads the entry (a real ``from_pretrained`` of the saved folder) without converting."""
    cache_dir = tmp_path_factory.mktemp("tokenizer-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(tokenizer_cache.CACHE_ENV, str(cache_dir))
        made = Conversions(mp, from_gguf)
        assert tokenizer_cache.load_gguf_tokenizer(source.path, source.gguf_file) is from_gguf
        entries = list(cache_dir.iterdir())
        assert len(entries) == 1 and entries[0].is_dir(), entries  # one whole entry, no leftovers
        tok = tokenizer_cache.load_gguf_tokenizer(source.path, source.gguf_file)
        assert made.count == 1, "the GGUF file was converted again although its entry exists"
        assert tok is not from_gguf
        return tok


def test_a_cached_tokenizer_has_the_same_vocabulary_special_tokens_and_template(cached, from_gguf):
    assert cached.get_vocab() == from_gguf.get_vocab()
    assert cached.all_special_tokens == from_gguf.all_special_tokens
    assert (cached.bos_token_id, cached.eos_token_id, cached.pad_token_id) == (
        from_gguf.bos_token_id,
        from_gguf.eos_token_id,
        from_gguf.pad_token_id,
    )
    assert cached.chat_template == from_gguf.chat_template
    for chat in CHATS:
        for prompt in (True, False):
            assert cached.apply_chat_template(chat, add_generation_prompt=prompt) == from_gguf.apply_chat_template(
                chat, add_generation_prompt=prompt
            )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80))
def test_a_cached_tokenizer_encodes_and_decodes_any_text_alike(cached, from_gguf, text):
    ids = from_gguf.encode(text)
    assert cached.encode(text) == ids
    assert cached.decode(ids) == from_gguf.decode(ids)


def test_a_second_writer_of_an_entry_keeps_the_first_and_leaves_nothing(tmp_path, from_gguf):
    entry = tmp_path / "entry"
    tokenizer_cache._store(from_gguf, tmp_path, entry)
    first = {p.name: p.read_bytes() for p in entry.iterdir()}
    tokenizer_cache._store(from_gguf, tmp_path, entry)  # the rename onto a whole entry loses
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]
    assert {p.name: p.read_bytes() for p in entry.iterdir()} == first


def test_a_damaged_entry_is_rebuilt_from_the_gguf_file(source, from_gguf, conversions, tmp_path, monkeypatch):
    monkeypatch.setenv(tokenizer_cache.CACHE_ENV, str(tmp_path))
    entry = tmp_path / tokenizer_cache.entry_name(Path(source.path) / source.gguf_file)
    entry.mkdir()
    (entry / "tokenizer.json").write_text('{"truncated": ')
    (entry / "tokenizer_config.json").write_text("{}")
    with pytest.warns(UserWarning, match=r"tokenizer cache entry .* is unreadable .* replacing it"):
        assert tokenizer_cache.load_gguf_tokenizer(source.path, source.gguf_file) is from_gguf
    assert conversions.count == 1
    again = tokenizer_cache.load_gguf_tokenizer(source.path, source.gguf_file)  # the entry was replaced
    assert conversions.count == 1 and again.encode("Top by price?") == from_gguf.encode("Top by price?")
    assert [p.name for p in tmp_path.iterdir()] == [entry.name]


@pytest.mark.parametrize("setting", ["a file, not a folder", "off"])
def test_an_unusable_or_disabled_cache_still_loads_the_tokenizer(
    source, from_gguf, conversions, tmp_path, monkeypatch, setting
):
    if setting == "off":
        monkeypatch.setenv(tokenizer_cache.CACHE_ENV, "off")
        assert tokenizer_cache.cache_root() is None
    else:
        blocker = tmp_path / "cache"
        blocker.write_text("not a folder")
        monkeypatch.setenv(tokenizer_cache.CACHE_ENV, str(blocker))
    assert tokenizer_cache.load_gguf_tokenizer(source.path, source.gguf_file) is from_gguf
    assert tokenizer_cache.load_gguf_tokenizer(source.path, source.gguf_file) is from_gguf
    assert conversions.count == 2  # nothing stored, so each load converts
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if setting == "off" else ["cache"])


def test_a_changed_file_or_library_names_another_entry(tmp_path, monkeypatch):
    import transformers

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(16))
    name = tokenizer_cache.entry_name(gguf)
    assert tokenizer_cache.entry_name(gguf) == name
    st_ = gguf.stat()
    os.utime(gguf, ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000_000))
    touched = tokenizer_cache.entry_name(gguf)
    assert touched != name
    monkeypatch.setattr(transformers, "__version__", transformers.__version__ + ".post1")
    assert tokenizer_cache.entry_name(gguf) not in (name, touched)


def test_the_default_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv(tokenizer_cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tokenizer_cache.cache_root() == tmp_path / "quandary" / "tokenizers"
