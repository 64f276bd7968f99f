"""What a careful annotator rejects in programmatic questions (issue #35), as automatic checks.

Used by ``bench/bench_defects.py``. Each check is deterministic and judges one question group (all
readings of an ambiguous question) of one database; :class:`Reviewer` also remembers the groups it
has seen, for near-duplicates. The checks are written from the reviewer's side: they read the text,
execute the SQL and look at the data (plain ``sqlite3``, read-only), never the generator's plans.

* ``identifier_shaped`` — a schema identifier shape in what a person reads (``snake_case``,
  ``camelCase``, a trailing "id", a predicate column as a noun: "whose directed by is", "the is
  male of"), or a known schema typo ("openning", "siz");
* ``template_unfit`` — a template on an entity it does not fit: regulations compliance or suppliers
  of a non-organisation, parking spaces of a non-place, a person's attribute of a thing, EU
  membership or time zones of a column whose values are no place names;
* ``unrounded_threshold`` — a threshold a person would not say (8105162, 2,449,185.20, 10.1067,
  '2013-02-13 05:15:21');
* ``made_up_concept`` — a concept named from a column where high/low means nothing ("high-weekly-rank",
  "standout singers" defined by a birth year or an episode number);
* ``projection_only_readings`` — two readings whose answers hold the same values once projected to
  the columns they share (only a name column added);
* ``always_true_condition`` — "whose sex is 'M' or 'F'" where the two values are every value;
* ``undeclared_inclusion`` — a *missing relationship* between two tables that an inclusion
  dependency links (every value of a key-like column of one is a key of the other);
* ``near_duplicate`` — a question that means what an earlier one of the same database means (same
  SQL, same feedback up to table names, or the same words up to values).

Issue #41, what a careful annotator still rejects on unseen databases:

* ``column_pasted`` — a column name pasted in: an abbreviated coordinate ("a large long", "whose
  lat"), a unit tail ("mean temperature f", "the inches of"), a mass noun pluralised ("the
  weathers", "faculties"), a column phrase that is no noun phrase ("number of in season", "a large
  show times per day");
* ``invented_concept`` — a concept no column measures: "standout", "notable", "important",
  "outstanding", "considerable" rows, or a degree adjective on a coordinate, id or code;
* ``fk_role_unsaid`` — a join through a key whose role the question does not say: the table
  reaches its parent through several keys (start / end station) or through a role-named key
  (``Advisor`` → faculty) and the question has none of the role's words;
* ``placeholder_value`` — an empty string or a placeholder ('N/A', 'Cancelled', 'TBD') used as a
  value, or a lone word used as a value of a column of names;
* ``linked_missing_relationship`` — a missing relationship between tables a chain of
  relationships joins (a many-to-many linking table crossed on the way) or whose date columns
  match day by day (every trip's start day is a weather date);
* ``scope_linked_only`` — a collective scope reading that divides by the linked rows only (the 4
  faculty who advise students) instead of every row of the named set (the 20 in the room);
* ``template_unfit`` also covers loyalty points of a non-customer, industry regulations of a
  non-business (student clubs), awards or opening hours of a station or a continent.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

TYPOS = {"openning", "siz", "staring", "adress", "lenght", "heigth", "wieght", "recieve", "occurence", "catagory"}

_ROUND_SIG = 2  # significant digits a person says for a threshold ("about 2.4 million", "above 45")


def _is_round(text: str) -> bool:
    """'45', '2.5', '185', '2,400,000', '1990' are round; '8105162', '10.1067', '2,449,185.20', '187' are not."""
    t = text.replace(",", "")
    try:
        x = float(t)
    except ValueError:
        return True
    if x == 0:
        return True
    if x.is_integer() and 1000 <= x <= 2200 and "." not in t:
        return True  # a year
    digits = re.sub(r"^0+", "", t.replace("-", "").replace(".", "")).rstrip("0")
    return (
        len(digits) <= _ROUND_SIG
        or (len(digits) == _ROUND_SIG + 1 and digits.endswith("5"))
        or (x.is_integer() and abs(x) <= 100)
    )


def _values_look_like_places(values: list) -> bool:
    words = [v for v in values if isinstance(v, str) and v.strip()]
    if len(words) < 2:
        return False
    placey = [
        v
        for v in words
        if re.fullmatch(r"[A-Za-z][a-zA-Z.'-]+(?: [A-Za-z.'-]+){0,3}", v.strip())
        and not re.search(r"\d|@", v)
        and not v.isupper()
    ]
    return len(placey) >= 0.8 * len(words)


def _measure(c) -> bool:
    from pipelines.abiss.programmatic.entity_kinds import is_measure  # lazy: absent in old trees

    return is_measure(c)


def _stem(name: str) -> set[str]:
    words = {w.lower() for w in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", name) if len(w) > 2}
    return {w[:-1] if w.endswith("s") else w for w in words} - {"id", "code", "name"}


class Reviewer:
    def __init__(self, path: Path, analysis):
        self.path = path
        self.a = analysis
        self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.con.text_factory = lambda b: b.decode("utf-8", "replace")
        self.seen_sql: set = set()
        self.seen_feedback: set = set()
        self.seen_frames: list[tuple[str, set]] = []
        self._inds: set | None = None

    # ------------------------------------------------------------------ helpers
    def rows(self, sql: str) -> list[tuple] | None:
        try:
            return self.con.execute(sql).fetchall()
        except sqlite3.Error:
            return None

    def inclusion_pairs(self) -> set[frozenset]:
        """Brute force: table pairs linked by an inclusion dependency between key-like columns —
        every non-null value (at least 3 distinct) of a column of X is a value of a unique column of
        Y, and the column is not a small dense counter (1..n) that any id column would contain."""
        if self._inds is not None:
            return self._inds
        inds: set[tuple[str, str]] = set()
        uniq: list[tuple[str, str, set]] = []
        cols: list[tuple[str, str, set]] = []
        for t in self.a.tables:
            n = t.row_count
            for c in t.columns:
                if c.role in ("other", "temporal"):
                    continue
                if c.role == "numeric" and not c.is_key and _measure(c):
                    continue  # capacities 500, 600, 700 in two tables link nothing (issue #41)
                vals = self.rows(f'SELECT DISTINCT "{c.name}" FROM "{t.name}" WHERE "{c.name}" IS NOT NULL LIMIT 5001')
                if not vals or len(vals) > 5000:
                    continue
                vs = {v[0] for v in vals}
                if c.distinct >= n and n >= 3:
                    uniq.append((t.name, c.name, vs))
                if len(vs) >= 3:
                    cols.append((t.name, c.name, vs))
        for tx, cx, vx in cols:
            nums = [v for v in vx if isinstance(v, (int, float))]
            dense = len(nums) == len(vx) and nums and max(nums) <= 3 * len(vx) + 5
            for ty, _cy, vy in uniq:
                # a small dense counter (1..n) is in any id column by chance, unless its name says whose
                named = _stem(cx) & _stem(ty)
                if ty != tx and vx <= vy and (not dense or named):
                    inds.add((tx, ty))
        declared = {(e.src, e.dst) for e in self.a.edges if not getattr(e, "inferred", False)}
        ups: dict[str, set] = {}
        for x, y in inds | declared:
            ups.setdefault(x, set()).add(y)
        self._inds = {frozenset(p) for p in inds}
        # through a linking table: X holds keys of A and of B, one of them undeclared
        for x, parents in ups.items():
            for a in parents:
                for b in parents:
                    if a != b and ((x, a) in inds - declared or (x, b) in inds - declared):
                        self._inds.add(frozenset((a, b)))
        return self._inds

    def _frame(self, q: str) -> set:
        t = re.sub(r"'[^']*'", " V ", q.lower())
        t = re.sub(r"\d[\d,.]*", " N ", t)
        return set(re.findall(r"[a-z]+|V|N", t)) - {"the", "a", "an", "of", "me", "please", "you", "can", "could"}

    # ------------------------------------------------------------------ checks
    def defects(self, group: list[dict]) -> set[str]:
        c = group[0]
        sub = c["subcategory"]
        q = c["question"]
        hks = [r.get("hidden_knowledge") or "" for r in group]
        said = " ".join([q, c.get("evidence") or ""] + hks)
        # what a person reads: no quoted data values, no "(Table.column)" citations in hidden knowledge
        unquoted = re.sub(r"'[^']*'", "", re.sub(r"(\w)'(\w)", r"\1\2", said))
        unquoted = re.sub(r"\([\w ]+\.[^()]+\)", "", unquoted)
        out: set[str] = set()

        if (
            re.search(r"\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z][a-z]+\b", unquoted)
            or re.search(r"\b(\w+ )?(address|code|type) ids?\b", unquoted, re.I)
            or re.search(r"\bwhose (\w+ )?by is\b|\bthe (is|has) \w+ of\b|\bwhose (is|has) \w+ (is|are)\b", unquoted)
            or any(re.search(rf"\b{t}\b", unquoted, re.I) for t in TYPOS)
            # predicate columns as nouns ("the same directed by as mine"), flag words ("the if firsts"),
            # lookup prefixes and abbreviations ("ref feature type", "indep year"), raw ranges ("18 49")
            or re.search(r"\b(the|same|my|whose) (\w+ )?\w+ed by( as| is| are|[?.,]|$)", unquoted)
            or re.search(r"\b(the|my|whose|same) (if|is|has|was|does) \w+", unquoted)
            or re.search(r"\b(ref|indep|desc|num|pct|yr|amt|qty|millions)\b", unquoted, re.I)
            or re.search(r"\b\d+ \d+ [a-z]+", unquoted)
        ):
            out.add("identifier_shaped")

        out |= self._unfit(c, q)

        for num in re.findall(
            r"(?:above|below|greater than|less than|after|before|on or after) '?([\d,.:\- ]+\d)", said
        ):
            num = num.strip()
            if re.match(r"\d{4}-\d{2}-\d{2}", num):
                if re.search(r"\d{2}:\d{2}", num) and not num.endswith("00:00:00"):
                    out.add("unrounded_threshold")  # a clock time to the second; a plain date is sayable
            elif not _is_round(num):
                out.add("unrounded_threshold")

        if sub in ("answerable_with_evidence", "conflicting_knowledge", "lexical_vagueness"):
            if re.search(r"\b(high|low)-(?!revenue\b|budget\b|rated\b|paid\b)[\w-]+", said, re.I) or re.search(
                r"\b(considerable|large|small|high|low|modest) [\w ]*\b(rank|position|id|code|episode|year)s?\b",
                said,
                re.I,
            ):
                out.add("made_up_concept")
            if sub == "conflicting_knowledge" and re.search(
                r"whose [\w ]*\b(year|rank|position|number|episode|id|code|version)s? (is|are) greater", said, re.I
            ):
                out.add("made_up_concept")

        if len(group) == 2 and all(r.get("sql") for r in group):
            res = [self.rows(r["sql"]) for r in group]
            if all(x is not None and x for x in res):
                a_rows, b_rows = res
                k = min(len(a_rows[0]), len(b_rows[0]))
                pa = {r[-k:] for r in a_rows}
                pb = {r[-k:] for r in b_rows}
                if pa == pb:
                    out.add("projection_only_readings")

        for m in re.finditer(r"whose ([\w ]+?) (?:is|are) ('[^']*'|\d+) or ('[^']*'|\d+)", q):
            vals = {m.group(2).strip("'"), m.group(3).strip("'")}
            for t in self.a.tables:
                for col in t.columns:
                    if col.words == m.group(1) and 0 < col.distinct <= 2 and {str(v) for v in col.values} <= vals:
                        out.add("always_true_condition")

        if sub == "missing_relationship":
            m = re.search(r"Both (\S+) and (\S+) exist", c.get("feedback") or "")
            if m and frozenset((m.group(1), m.group(2))) in self.inclusion_pairs():
                out.add("undeclared_inclusion")

        out |= self._issue41(group, c, q, said, unquoted)

        sqls = tuple(sorted(r.get("sql") or "" for r in group))
        fb = c.get("feedback") or ""  # the same feedback is the same reason: one template, one meaning
        frame = self._frame(q)
        dup = (any(sqls) and (sub, sqls) in self.seen_sql) or (
            sub not in ("improper_question",) and fb and (sub, fb) in self.seen_feedback
        )
        for s, f in self.seen_frames:
            if s == sub and frame and len(frame & f) >= 0.85 * len(frame | f):
                dup = True
        if dup:
            out.add("near_duplicate")
        self.seen_sql.add((sub, sqls))
        if fb:
            self.seen_feedback.add((sub, fb))
        self.seen_frames.append((sub, frame))
        return out

    # ------------------------------------------------------------------ issue #41
    def _issue41(self, group: list[dict], c: dict, q: str, said: str, unquoted: str) -> set[str]:
        out: set[str] = set()
        sub = c["subcategory"]
        low = unquoted.lower()
        if (
            re.search(r"\b(a|an|the|high|low|large|small|whose|considerable|modest) (lat|lng|lon)\b", low)
            or re.search(
                r"\b(a|an|high|low|large|small|considerable|modest) long(?= (is|are|above|below|of)\b|[?.,]|$)", low
            )
            or re.search(r"\bwhose long (is|are)\b", low)
            or re.search(
                r"\b(temperature|speed|pressure|precipitation|visibility|height|weight) (f|c|k|in|mph|ft)\b", low
            )
            or re.search(r"\bthe (inches|feet|miles|mph|cm|kg) of\b", low)
            or re.search(r"\b(weathers|faculties|staffs|equipments|informations|furnitures|softwares|feedbacks)\b", low)
            or re.search(r"\bnumber of (in|on|at|by|per|if|is)\b", low)
            or re.search(r"\b(a|an|high|low|large|small) [\w ]{0,20}\w+s per (day|week|month|year)\b", low)
        ):
            out.add("column_pasted")
        if sub in ("answerable_with_evidence", "conflicting_knowledge", "lexical_vagueness") and (
            re.search(r"\b(standout|notable|important|outstanding|considerable|modest|flagship|premium)\b", low)
            or re.search(
                r"\b(high|low|large|small|big)\w* (latitude|longitude|lat|long|id|code|zip|zip code|phone)\b", low
            )
            or re.search(r"whose (latitude|longitude|lat|long|[\w ]*\bid|[\w ]*\bcode) (is|are) (greater|above)", low)
        ):
            out.add("invented_concept")
        if sub not in ("entity_ambiguity", "lexical_overlap"):
            for r in group:
                if self._role_unsaid(r.get("sql") or "", q.lower()):
                    out.add("fk_role_unsaid")
        if self._placeholder_used(group, said):
            out.add("placeholder_value")
        if sub == "missing_relationship":
            m = re.search(r"Both (\S+) and (\S+) exist", c.get("feedback") or "")
            if m and (self._chain_joins(m.group(1), m.group(2)) or self._days_match(m.group(1), m.group(2))):
                out.add("linked_missing_relationship")
        if sub == "scope_ambiguity":
            for r in group:
                if (r.get("hidden_knowledge") or "").startswith("Collective") and self._linked_only(r.get("sql") or ""):
                    out.add("scope_linked_only")
        return out

    def _edges(self) -> list:
        return list(self.a.edges)

    def _role_unsaid(self, sql: str, q: str) -> bool:
        """A join ``child.key = parent.pk`` where the key's role must be said and the question has
        none of the role's words (or their verb: winning → won)."""
        aliases = {al: t for t, al in re.findall(r'"(\w+)" AS (\w+)', sql)}
        for a1, c1, a2, c2 in re.findall(r'(\w+)\."([^"]+)" = (\w+)\."([^"]+)"', sql):
            for ca, cc, pa in ((a1, c1, a2), (a2, c2, a1)):
                child, parent = aliases.get(ca), aliases.get(pa)
                if not child or not parent:
                    continue
                e = next(
                    (
                        x
                        for x in self._edges()
                        if x.src.lower() == child.lower() and x.src_col == cc and x.dst.lower() == parent.lower()
                    ),
                    None,
                )
                if e is None:
                    continue
                several = sum(1 for x in self._edges() if x.src == e.src and x.dst == e.dst) > 1
                words = [w.lower() for w in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", cc) if w]
                role = [w for w in words if w not in {"id", "ids", "name", "code", "key", "no", "number", "fk"}]
                pstem = _stem(e.dst) | {w.lower() for w in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", e.dst_col) if w}
                extra = [w for w in role if (w[:-1] if w.endswith("s") else w) not in pstem and w not in pstem]
                if not several and not extra:
                    continue
                need = extra or role
                verbs = {"winning": "won", "losing": "lost", "owning": "owned", "hosting": "hosted"}
                if not any(w[:5] in q or (verbs.get(w) and verbs[w] in q) for w in need if len(w) > 2):
                    return True
        return False

    _PLACEHOLDERS = {"n/a", "na", "none", "null", "unknown", "tbd", "tba", "-", "--", "?", "cancelled", "canceled"}

    def _placeholder_used(self, group: list[dict], said: str) -> bool:
        for r in group:
            sql = r.get("sql") or ""
            if re.search(r"=\s*''(?!')", sql):
                return True
            for col, v in re.findall(r'"([^"]+)"\s*=\s*\'((?:[^\']|\'\')*)\'', sql):
                v = v.replace("''", "'")
                if v.strip().lower() in self._PLACEHOLDERS:
                    return True
                if v.strip().lower() in {"cancelled", "canceled", "postponed"} and self._names_column(col):
                    return True  # a status word among names
        return bool(re.search(r"(?:is|are|of|the \w+) '(N/A|TBD|TBA|Cancelled|Unknown|None|null|-)'", said))

    def _names_column(self, col: str) -> bool:
        """Whether a column holds names ('Ann Hale'): 80 % of its rows are two or more capitalised words."""
        for t in self.a.tables:
            c = t.column(col)
            if c is None or c.role not in ("text", "categorical"):
                continue
            vals = self.rows(f'SELECT "{c.name}" FROM "{t.name}" WHERE "{c.name}" IS NOT NULL LIMIT 500') or []
            named = [
                v
                for (v,) in vals
                if isinstance(v, str)
                and len(v.split()) >= 2
                and all(w[:1].isupper() for w in v.split() if w[:1].isalpha())
            ]
            if vals and len(named) >= 0.8 * len(vals):
                return True
        return False

    def _chain_joins(self, a: str, b: str) -> bool:
        """Brute force: a path of foreign keys from a to b that goes down only before going up, except
        across a linking table (a table holding little but two foreign keys)."""
        edges = self._edges()
        linking = set()
        for t in self.a.tables:
            fks = {x.src_col for x in edges if x.src == t.name}
            own = [col for col in t.columns if col.name not in fks and not col.primary_key]
            if len({x.dst for x in edges if x.src == t.name}) >= 2 and len(own) <= 1:
                linking.add(t.name)
        a, b = (self.a.table(a).name if self.a.table(a) else a), (self.a.table(b).name if self.a.table(b) else b)
        seen, stack = {(a, 0)}, [(a, 0)]
        while stack:
            node, up = stack.pop()
            nxt = [(x.dst, 1) for x in edges if x.src == node]
            nxt += [(x.src, up) for x in edges if x.dst == node and (not up or x.src in linking)]
            for n, u in nxt:
                if n == b:
                    return True
                if (n, u) not in seen:
                    seen.add((n, u))
                    stack.append((n, u))
        return False

    def _days_match(self, a: str, b: str) -> bool:
        """Every day of a date column of one table is a day of a date column of the other."""
        ta, tb = self.a.table(a), self.a.table(b)
        if ta is None or tb is None:
            return False

        def days(t):
            out = []
            for col in t.columns:
                vals = (
                    self.rows(f'SELECT DISTINCT "{col.name}" FROM "{t.name}" WHERE "{col.name}" IS NOT NULL LIMIT 5001')
                    or []
                )
                ds = {
                    m.group(1)
                    for (v,) in vals
                    if isinstance(v, str) and (m := re.match(r"(\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}/\d{2,4})", v))
                }
                if len(ds) >= 3 and len(ds) >= 0.9 * len(vals):
                    out.append(ds)
            return out

        return any(x <= y or y <= x for x in days(ta) for y in days(tb))

    def _linked_only(self, sql: str) -> bool:
        """The collective reading's denominator counts fewer rows than the named set holds."""
        m = re.search(
            r'HAVING COUNT\(DISTINCT (\w+)\."([^"]+)"\) = \((SELECT COUNT\(DISTINCT [^)]*\) FROM (.*))\)$', sql
        )
        if not m:
            return False
        alias, key, denom_sql, rest = m.group(1), m.group(2), m.group(3), m.group(4)
        table = dict((al, t) for t, al in re.findall(r'"(\w+)" AS (\w+)', sql)).get(alias)
        if table is None:
            return False
        where = rest.split(" WHERE ", 1)[1] if " WHERE " in rest else ""
        if where and re.search(rf"\b(?!{alias}\b)T\d\.", where):
            return False  # the filter names another table: no named set to count alone
        named = self.rows(
            f'SELECT COUNT(DISTINCT {alias}."{key}") FROM "{table}" AS {alias}' + (f" WHERE {where}" if where else "")
        )
        denom = self.rows(denom_sql)
        return bool(named and denom) and denom[0][0] < named[0][0]

    def _unfit(self, c: dict, q: str) -> set[str]:
        from pipelines.abiss.programmatic.entity_kinds import table_kind  # lazy: absent in old trees

        sub = c["subcategory"]
        fb = c.get("feedback") or ""
        kinds = {}
        for t in self.a.tables:
            kinds[t.name] = table_kind(t)
        asked = {kinds[t.name] for t in self.a.tables if _mentions(q, t.name)}
        low = q.lower()
        heads = {_head(t.name) for t in self.a.tables if _mentions(q, t.name)}
        if sub in ("missing_entity", "missing_external_knowledge"):
            if "loyalty points" in low and not heads & CUSTOMERS:
                return {"template_unfit"}  # loyalty points of a professor
            if re.search(r"industry regulations|suppliers|invoices", low) and not heads & BUSINESSES:
                return {"template_unfit"}  # regulations for student clubs, invoices of a superhero
            if (
                re.search(r"\b(awards|opening hours|staff members|parking spaces)\b", low)
                and heads & REGIONS_AND_STATIONS
            ):
                return {"template_unfit"}  # awards of a bike station, opening hours of a continent
        if sub == "missing_external_knowledge":
            if "industry regulations" in fb and "organisation" not in asked:
                return {"template_unfit"}
            m = re.search(r"whose ([\w ]+?) (?:is in|fell)", q) or re.search(r"based on their ([\w ]+)", q)
            if m and ("European Union" in fb or "Time zones" in fb):
                col = next((x for t in self.a.tables for x in t.columns if x.words == m.group(1).strip()), None)
                if col is None or not _values_look_like_places(col.values or self._some(col)):
                    return {"template_unfit"}
        if sub == "missing_entity":
            m = re.search(r"describing ([\w ]+?) \(tables", fb)
            ents = {"suppliers": {"organisation", "product"}, "parking spaces": {"place", "organisation"}}
            if m and m.group(1) in ents:
                kinds_q = {kinds[t.name] for t in self.a.tables if _mentions(q, t.name)}
                if kinds_q and not kinds_q & ents[m.group(1)]:
                    return {"template_unfit"}
            m = re.search(r"about the ([\w ]+?) of [\w ]+?: the (\S+) table", fb)
            person_only = {"phone number", "email address", "nickname", "marital status", "blood type", "shoe size"}
            if m and m.group(1) in person_only and kinds.get(m.group(2)) != "person":
                return {"template_unfit"}
        return set()

    def _some(self, col) -> list:
        rows = self.rows(f'SELECT DISTINCT "{col.name}" FROM "{col.table}" WHERE "{col.name}" IS NOT NULL LIMIT 20')
        return [r[0] for r in rows or []]


CUSTOMERS = {"customer", "client", "guest", "member", "passenger", "user", "shopper", "buyer", "subscriber", "patron"}
BUSINESSES = {
    "company", "business", "restaurant", "hotel", "shop", "store", "bank", "agency", "airline", "manufacturer",
    "maker", "brand", "firm", "vendor", "supplier", "dealer", "clinic", "hospital", "farm", "kennel", "publisher",
    "studio", "operator", "gym", "retailer", "carrier", "insurer", "distributor",
}  # fmt: skip
REGIONS_AND_STATIONS = {"station", "continent", "country", "region", "state", "province", "county", "district", "city"}


def _head(table: str) -> str:
    words = [w.lower() for w in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", table) if w.isalpha()]
    words = [w for w in words if w not in {"data", "info", "list", "table", "details"}] or words
    w = words[-1] if words else ""
    return w[:-3] + "y" if w.endswith("ies") else w[:-1] if w.endswith("s") and not w.endswith("ss") else w


def _mentions(q: str, table: str) -> bool:
    from pipelines.abiss.programmatic.phrasing import table_plural, table_singular

    low = q.lower()
    return any(re.search(rf"\b{re.escape(x.lower())}\b", low) for x in (table_plural(table), table_singular(table)))
