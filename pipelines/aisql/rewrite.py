"""Dialect handling for AI-operator SQL: BigQuery ``AI.X(...)`` and ThalamusDB ``NLfilter``/``NLjoin``
rewritten into DuckDB SQL that calls the Python UDFs of :mod:`pipelines.aisql.operators`.

BigQuery → DuckDB (spec §4.1):

1. fill the SemBench template placeholders (``<<connection>>``, ``<<thinking_budget>>`` → 0, ...);
2. rewrite ``AI.X(`` to ``AI_X(`` *before* parsing, outside string literals (sqlglot would read
   ``AI.IF`` as ``IF``); an ``AI.X`` we do not implement is an error naming it;
3. parse with ``read='bigquery'``;
4. inside each call: drop ``connection_id``/``model_params``/``endpoint``/``output_schema``, unwrap
   ``prompt =>``, turn a prompt tuple into ``a || b || ...``, map ``FORMAT('..%s..', x)`` to
   ``printf`` (DuckDB's ``format`` uses ``{}``) and drop the ``.result`` field access;
5. ``COUNTIF(x)`` becomes ``COUNT(CASE WHEN x THEN 1 END)``: BigQuery answers 0 over no rows (or
   only NULLs), DuckDB's ``count_if`` answers NULL;
6. emit DuckDB SQL.

ThalamusDB SQL is already DuckDB SQL once the UDFs exist; it is parsed (for the splitter) but runs
as written. All operator calls end up as ``exp.Anonymous`` nodes named by :data:`AI_OPERATORS`.
"""

import functools
import re

import sqlglot
from sqlglot import exp

# operator name (as a DuckDB function) -> kind of value it returns
AI_OPERATORS: dict[str, str] = {
    "ai_if": "bool",
    "ai_score": "score",
    "ai_generate": "text",
    "ai_classify": "category",
    "nlfilter": "bool",
    "nljoin": "bool",
}
BOOLEAN_OPERATORS = frozenset(k for k, v in AI_OPERATORS.items() if v == "bool")
BIGQUERY_OPERATORS = ("IF", "SCORE", "GENERATE", "CLASSIFY")
KNOWN_BIGQUERY_AI = BIGQUERY_OPERATORS + ("SEARCH", "FORECAST", "EMBED", "AGG")  # recognised, not all run
DIALECTS = ("bigquery", "thalamusdb")

PLACEHOLDERS = {
    "<<connection>>": "local",
    "<<query_id>>": "local",
    "<<endpoint>>": "local",
    "<<thinking_budget>>": "0",
    "<<other_params>>": "",
}
_DROPPED_KWARGS = {"connection_id", "model_params", "endpoint", "output_schema", "model"}
_PRE_PREFIX = "AIOP_"
_AI_CALL = re.compile(r"\bAI\s*\.\s*([A-Za-z_]+)\s*\(", re.IGNORECASE)
_THALAMUS_CALL = re.compile(r"\b(NLfilter|NLjoin)\s*\(", re.IGNORECASE)


class SqlRewriteError(ValueError):
    """The SQL cannot be turned into runnable DuckDB SQL; the message says why."""


def fill_placeholders(sql: str) -> str:
    for key, value in PLACEHOLDERS.items():
        sql = sql.replace(key, value)
    return sql


def _outside_literals(sql: str):
    """Yield (start, end, is_code) spans: code vs quoted text ('..', "..", triple quotes, `..`, -- comments)."""
    i, n, start = 0, len(sql), 0
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            yield start, i, True
            j = sql.find("\n", i)
            j = n if j < 0 else j
            yield i, j, False
            i = start = j
            continue
        if ch in "'\"`":
            quote = sql[i : i + 3] if sql[i : i + 3] in ("'''", '"""') else ch
            yield start, i, True
            j = i + len(quote)
            while j < n:
                if sql[j] == "\\" and quote != "`":
                    j += 2
                    continue
                if sql.startswith(quote, j):
                    if len(quote) == 1 and quote == "'" and sql.startswith("''", j):
                        j += 2  # doubled quote inside a literal
                        continue
                    j += len(quote)
                    break
                j += 1
            yield i, j, False
            i = start = j
            continue
        i += 1
    yield start, n, True


def _sub_code(pattern: re.Pattern, repl, sql: str) -> str:
    return "".join(pattern.sub(repl, sql[a:b]) if code else sql[a:b] for a, b, code in _outside_literals(sql))


def find_operator_names(sql: str) -> list[str]:
    """AI operator names used in ``sql`` (outside literals), as written (``AI.IF``, ``NLfilter``)."""
    found: list[str] = []
    for a, b, code in _outside_literals(sql):
        if code:
            found += [f"AI.{m.group(1).upper()}" for m in _AI_CALL.finditer(sql[a:b])]
            found += [m.group(1) for m in _THALAMUS_CALL.finditer(sql[a:b])]
    return found


def _pre_rewrite_bigquery(sql: str) -> str:
    def repl(m: re.Match) -> str:
        name = m.group(1).upper()
        if name not in BIGQUERY_OPERATORS:
            known = "recognised but not supported locally" if name in KNOWN_BIGQUERY_AI else "unknown AI operator"
            raise SqlRewriteError(f"AI.{name}: {known} (supported: {', '.join('AI.' + o for o in BIGQUERY_OPERATORS)})")
        return f"{_PRE_PREFIX}{name}("  # a name sqlglot has no builtin for (it knows AI_CLASSIFY)

    return _sub_code(_AI_CALL, repl, sql)


def _concat(parts: list[exp.Expression]) -> exp.Expression:
    out = parts[0]
    for p in parts[1:]:
        out = exp.DPipe(this=out, expression=p, safe=True)
    return out


# Data inside a prompt travels between these two characters (stripped from the data itself), so the
# operator can hand it to the model in a delimited, escaped field instead of mixing it into the
# instruction (issue 19 item 6). Python's str.split() counts both as whitespace, so normalised
# instructions are unchanged.
DATA_OPEN, DATA_CLOSE = "\x1e", "\x1f"


def _chr(code: int) -> exp.Expression:
    return exp.Anonymous(this="chr", expressions=[exp.Literal.number(code)])


def mark_data(node: exp.Expression) -> exp.Expression:
    """``chr(30) || <node without chr(30)/chr(31)> || chr(31)``: a data value inside a prompt."""
    text = exp.cast(node, "VARCHAR")
    for code in (30, 31):
        text = exp.Anonymous(this="replace", expressions=[text, _chr(code), exp.Literal.string("")])
    return _concat([_chr(30), text, _chr(31)])


def _is_chr(node, codes=(30, 31)) -> bool:
    return (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "chr"
        and len(node.expressions) == 1
        and node.expressions[0].is_int
        and int(node.expressions[0].name) in codes
    )


def unmark_data(tree: exp.Expression) -> exp.Expression:
    """``tree`` without the data delimiters of :func:`mark_data` (to show or re-render a query)."""

    def strip(node):
        if (
            isinstance(node, exp.Anonymous)
            and str(node.this).lower() == "replace"
            and len(node.expressions) == 3
            and _is_chr(node.expressions[1])
        ):
            inner = node.expressions[0]
            return inner.this if isinstance(inner, exp.Cast) else inner
        if isinstance(node, exp.DPipe):
            if _is_chr(node.this):
                return node.expression
            if _is_chr(node.expression):
                return node.this
        return node

    out = tree.copy()
    while True:
        before = out.sql("duckdb")
        out = out.transform(strip)
        if out.sql("duckdb") == before:
            return out


def _is_text_literal(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _prompt_expr(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Kwarg):
        node = node.expression
    if isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, (exp.Tuple, exp.Struct)):
        return _concat([e if _is_text_literal(e) else mark_data(e) for e in map(_prompt_expr, node.expressions)])
    if isinstance(node, exp.DPipe):  # 'text ' || col || ' more text' (mmqa): the same, written as a chain
        return _concat([e if _is_text_literal(e) else mark_data(e) for e in _dpipe_operands(node)])
    return node


def _dpipe_operands(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.DPipe):
        return _dpipe_operands(node.this) + _dpipe_operands(node.expression)
    return [node]


def operator_name(node: exp.Expression) -> str | None:
    """The AI operator a node calls (``ai_if``, ``nlfilter``, ...) or None."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name.startswith(_PRE_PREFIX.lower()):
            name = "ai_" + name[len(_PRE_PREFIX) :]
        return name if name in AI_OPERATORS else None
    if isinstance(node, exp.AIGenerate):
        return "ai_generate"
    if isinstance(node, exp.AIClassify):
        return "ai_classify"
    return None


def _flat_args(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    args = []
    for key in node.arg_types:
        v = node.args.get(key)
        if v is None:
            continue
        args += v if isinstance(v, list) else [v]
    return args


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _clean(message: str) -> str:
    """One line, without the terminal underline codes sqlglot puts around the offending token."""
    return " ".join(_ANSI.sub("", message).split())


def _check_prompt(op: str, prompt: exp.Expression) -> None:
    """The prompt must carry an instruction (a string); a number or a bare column cannot be one."""
    if isinstance(prompt, exp.Literal) and not prompt.is_string:
        raise SqlRewriteError(
            f"{op}: the prompt is the number {prompt.sql()}; give an instruction and the input, "
            f"e.g. {op}(('Is this review positive? ', r.reviewText))"
        )
    if not any(lit.is_string for lit in prompt.find_all(exp.Literal)):
        raise SqlRewriteError(
            f"{op}({prompt.sql('bigquery')}): the prompt has no instruction text; write "
            f"{op}(('<instruction> ', {prompt.sql('bigquery')}))"
        )


def _normalise_bigquery_call(node: exp.Expression, name: str) -> exp.Expression:
    op = f"AI.{name[3:].upper()}"
    wants = ("prompt", "categories") if name == "ai_classify" else ("prompt",)
    positional, named = [], {}
    for a in _flat_args(node):
        if isinstance(a, exp.Kwarg):
            key = a.this.name.lower()
            if key in _DROPPED_KWARGS:
                continue
            if key not in wants:
                raise SqlRewriteError(
                    f"{op}: unknown argument '{a.this.name} =>' (expected "
                    f"{', '.join(w + ' =>' for w in wants)} or connection_id/model_params/endpoint)"
                )
            named[key] = a.expression
        else:
            positional.append(a)
    slots = [w for w in wants if w not in named]
    if len(positional) > len(slots):
        extra = ", ".join(x.sql("bigquery") for x in positional[len(slots) :])
        raise SqlRewriteError(
            f"{op} takes {len(wants)} argument{'s' if len(wants) > 1 else ''} "
            f"({', '.join(wants)}); remove the extra argument {extra}"
        )
    named.update(zip(slots, positional))
    if "prompt" not in named:
        raise SqlRewriteError(f"{op} has no prompt argument")
    if name == "ai_classify" and "categories" not in named:
        raise SqlRewriteError(f"{op} needs its categories: {op}(prompt, categories => ['a', 'b'])")
    args = [named[w] for w in wants]
    _check_prompt(op, _prompt_expr(args[0]))
    prompt = _prompt_expr(args[0])

    def printf(fmt: exp.Format) -> exp.Expression:
        return exp.Anonymous(
            this="printf",
            expressions=[fmt.this, *[a if _is_text_literal(a) else mark_data(a) for a in fmt.expressions]],
        )

    for fmt in list(prompt.find_all(exp.Format)):
        fmt.replace(printf(fmt))
    if isinstance(prompt, exp.Format):
        prompt = printf(prompt)
    return exp.Anonymous(this=name, expressions=[prompt, *args[1:]])


def parse_duckdb(sql: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError as e:
        raise SqlRewriteError(f"SQL does not parse: {_clean(str(e))[:200]}") from None
    if tree is None:
        raise SqlRewriteError("empty SQL")

    def builtin_to_udf(node):  # sqlglot knows AI_GENERATE/AI_CLASSIFY as builtins; we want plain UDF calls
        if isinstance(node, (exp.AIGenerate, exp.AIClassify)):
            return exp.Anonymous(
                this=operator_name(node),
                expressions=[a.expression if isinstance(a, exp.Kwarg) else a for a in _flat_args(node)],
            )
        return node

    return tree.transform(builtin_to_udf)


def bigquery_to_duckdb_tree(sql: str) -> exp.Expression:
    text = _pre_rewrite_bigquery(fill_placeholders(sql)).strip().rstrip(";")
    try:
        tree = sqlglot.parse_one(text, read="bigquery")
    except sqlglot.errors.ParseError as e:
        raise SqlRewriteError(f"BigQuery SQL does not parse: {_clean(str(e))[:200]}") from None
    if tree is None:
        raise SqlRewriteError("empty SQL")

    for ident in tree.find_all(exp.Identifier):  # dashed project names (bq-mm-benchmark) keep their quotes
        if not ident.quoted and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", ident.name or ""):
            ident.set("quoted", True)

    def transform(node: exp.Expression) -> exp.Expression:
        # `AI.GENERATE(...).result` → the call itself (the UDF returns the text directly)
        if isinstance(node, exp.Dot) and node.expression.name.lower() == "result" and operator_name(node.this):
            node = node.this
        name = operator_name(node)
        if name and name.startswith("ai_"):
            return _normalise_bigquery_call(node, name)
        return node

    def countif(node: exp.Expression) -> exp.Expression:
        # BigQuery's COUNTIF is 0 over no rows or only NULLs; DuckDB's count_if is NULL there (#39)
        if isinstance(node, exp.CountIf):
            return exp.Count(this=exp.Case(ifs=[exp.If(this=node.this, true=exp.Literal.number(1))]))
        return node

    return tree.transform(transform).transform(countif)


def to_duckdb(sql: str, dialect: str) -> str:
    """Runnable DuckDB SQL for a query written in ``dialect`` (``bigquery`` or ``thalamusdb``)."""
    return to_duckdb_tree(sql, dialect).sql("duckdb")


def to_duckdb_tree(sql: str, dialect: str) -> exp.Expression:
    """A fresh DuckDB-form tree of ``sql`` (callers may change it): a copy of a memoised parse, as
    the judge parses one gold many times (a copy costs a fraction of a parse)."""
    if not isinstance(sql, str) or not sql.strip():
        raise SqlRewriteError("empty SQL")
    return _parsed(sql, dialect).copy()


@functools.lru_cache(maxsize=512)
def _parsed(sql: str, dialect: str) -> exp.Expression:
    tree = _to_duckdb_tree(sql, dialect)
    # sqlglot parses what it cannot understand as an opaque Command: that is not a query.
    if isinstance(tree, exp.Command) or not isinstance(tree, exp.Query):
        raise SqlRewriteError(f"not a query (parsed as {type(tree).__name__}): {' '.join(sql.split())[:120]}")
    return tree


def _to_duckdb_tree(sql: str, dialect: str) -> exp.Expression:
    if dialect == "bigquery":
        return bigquery_to_duckdb_tree(sql)
    if dialect == "thalamusdb":
        tree = parse_duckdb(strip_comments(sql).strip().rstrip(";"))
        _check_thalamus_calls(tree)
        return tree
    raise SqlRewriteError(f"unknown dialect {dialect!r}; expected one of {DIALECTS}")


def _check_thalamus_calls(tree: exp.Expression) -> None:
    """NLfilter(column[, column...], 'instruction') and NLjoin(column1, column2, 'instruction'): at
    least one (two) input columns and a text instruction last (cars Q9 filters on two columns)."""
    for call in tree.find_all(exp.Anonymous):
        name = operator_name(call)
        if name not in ("nlfilter", "nljoin"):
            continue
        shown = "NLfilter" if name == "nlfilter" else "NLjoin"
        want = 2 if name == "nlfilter" else 3
        form = "NLfilter(column, 'instruction')" if name == "nlfilter" else "NLjoin(column1, column2, 'instruction')"
        args = list(call.expressions)
        if len(args) < want:
            raise SqlRewriteError(
                f"{shown} takes {want} arguments, got {len(args)} in {call.sql('duckdb')[:120]}; write {form}"
            )
        last = args[-1]
        if not (isinstance(last, exp.Literal) and last.is_string) and not any(
            lit.is_string for lit in last.find_all(exp.Literal)
        ):
            raise SqlRewriteError(f"{shown}: the instruction {last.sql('duckdb')} is not text; write {form}")


def strip_comments(sql: str) -> str:
    return "".join(sql[a:b] for a, b, code in _outside_literals(sql) if code or not sql.startswith("--", a))


def ai_calls(tree: exp.Expression) -> list[exp.Anonymous]:
    """Every AI operator call in ``tree`` (a DuckDB-form tree), in document order (depth first)."""
    return [n for n in tree.walk(bfs=False) if isinstance(n, exp.Anonymous) and operator_name(n)]


def prompt_text(call: exp.Anonymous) -> str:
    """The literal parts of a call's prompt (what a reader would call 'the prompt')."""
    name = operator_name(call)
    args = list(call.expressions)
    prompt = args[-1] if name in ("nlfilter", "nljoin") else args[0]
    return " ".join(lit.this for lit in prompt.find_all(exp.Literal, bfs=False) if lit.is_string and lit.this).strip()
