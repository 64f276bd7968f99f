import json

from cli import main


def test_sql_json_ok(demo_db_path, capsys):
    assert main(["sql", str(demo_db_path), "SELECT count(*) AS n FROM students", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["columns"] == ["n"] and out["rows"] == [[300]]


def test_sql_refused_exits_nonzero_with_one_line_reason(demo_db_path, capsys):
    assert main(["sql", str(demo_db_path), "DELETE FROM students"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("refused or failed: forbidden") and "\n" not in err


def test_sql_timeout_flag(demo_db_path, capsys):
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
    assert main(["sql", str(demo_db_path), runaway, "--timeout", "0.2"]) == 1
    assert "timeout" in capsys.readouterr().err


def test_db_register_folder_and_list(tmp_path, demo_db_path, capsys):
    root = tmp_path / "root"
    (root / "university").mkdir(parents=True)
    (root / "university" / "university.sqlite").write_bytes(demo_db_path.read_bytes())
    (root / "broken").mkdir()
    (root / "broken" / "broken.sqlite").write_text("garbage")
    assert main(["db", "register", str(root), "--folder"]) == 0
    captured = capsys.readouterr()
    assert "registered university" in captured.out
    assert "broken.sqlite" in captured.err and "not a SQLite database" in captured.err
    assert main(["db", "list"]) == 0
    assert "university" in capsys.readouterr().out
