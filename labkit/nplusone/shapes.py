"""Query *shapes*: SQL and URLs with the values taken out, so that repeats of one query group together.

Two queries have the same shape when they differ only in the values they carry. ``normalise_sql`` strips
comments, replaces string and number literals and every placeholder style (``?``, ``:name``, ``%s``,
``%(name)s``, ``$1``, ``@name``) by ``?``, collapses ``IN (…)`` lists of any length and multi-row
``VALUES`` lists to ``(...)``, upper-cases keywords, lower-cases unquoted identifiers and folds whitespace.
``normalise_url`` drops scheme, host and port, replaces numeric/UUID/hex path segments by ``{id}`` and
query-string values by ``{id}`` / ``{ids}`` (comma-separated lists) or ``{v}``. ``normalise_command`` does the
same for a Redis command (``GET product:17`` → ``GET product:?``; a run of keys of one shape → one, then ``…``).
``batch_size`` says how many values the largest such list carried, which the shape has taken out — or a
multi-key command's keys, a pipeline's commands: what tells a batched load from a per-item one.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

__all__ = ["batch_size", "normalise_command", "normalise_sql", "normalise_url"]

_KEYWORDS = frozenset(
    """select from where and or not in is null like glob between exists join left right inner outer cross
    natural on using order by group having limit offset asc desc distinct all union intersect except as
    insert into values update set delete replace returning with recursive case when then else end cast
    create table index view drop alter add primary key foreign references unique default if begin commit
    rollback savepoint release pragma explain query plan collate escape true false over partition filter
    window rows range""".split()
)

# One alternation, tried left to right at each position; order matters (comments before operators,
# quoted forms before bare words, placeholders before operators).
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*.*?(?:\*/|\Z))
  | (?P<string>(?:[xXbBnNeE])?'(?:[^']|'')*(?:'|\Z))
  | (?P<dollar>\$\$.*?\$\$)
  | (?P<qident>"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])
  | (?P<param>\?\d*|:[A-Za-z_]\w*|%\([^)]*\)s|%s|\$\d+|@[A-Za-z_]\w*)
  | (?P<number>0[xX][0-9A-Fa-f]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][\w$]*)
  | (?P<op><>|!=|<=|>=|==|\|\||<<|>>|::|[-+*/%<>=~!&|^(),;.])
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

# After these a "-" starts a negative literal rather than a subtraction.
_SIGN_CONTEXT = frozenset({"(", ",", "=", "<", ">", "<=", ">=", "<>", "!=", "==", "+", "-", "*", "/", "%"})


def _tokens(sql: str) -> list[str]:
    """Tokenise *sql*, dropping comments and whitespace, with every value already replaced by ``?``."""
    out: list[str] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind in ("ws", "line_comment", "block_comment"):
            continue
        if kind in ("string", "dollar", "param", "number"):
            # A unary minus folds into the literal: "x = -5" and "x = 5" are the same shape.
            prev = out[-1] if out else None
            if out and prev == "-" and (len(out) == 1 or out[-2] in _SIGN_CONTEXT or out[-2] in _KEYWORDS_UP):
                out.pop()
            out.append("?")
        elif kind == "word":
            low = text.lower()
            out.append(low.upper() if low in _KEYWORDS else low)
        elif kind == "qident":
            out.append(text)
        else:
            out.append(text)
    return out


_KEYWORDS_UP = frozenset(k.upper() for k in _KEYWORDS)


def _collapse_lists(toks: list[str]) -> list[str]:
    """Replace ``IN (?, ?, …)`` and ``VALUES (…), (…)`` by one ``(...)`` whatever their lengths."""
    out: list[str] = []
    i = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        if tok in ("IN", "VALUES") and i + 1 < n and toks[i + 1] == "(":
            j, ok = _value_groups_end(toks, i + 1, allow_many=tok == "VALUES")
            if ok:
                out.extend((tok, "(...)"))
                i = j
                continue
        out.append(tok)
        i += 1
    return out


def _value_groups_end(toks: list[str], start: int, *, allow_many: bool) -> tuple[int, bool]:
    """If ``toks[start:]`` is ``( ?, ?, … )`` (or several such groups joined by commas when *allow_many*),
    return the index after it and True; else ``(start, False)``. Only placeholders count: a sub-query stays."""
    i = start
    n = len(toks)
    groups = 0
    while i < n and toks[i] == "(":
        i += 1
        expect_value = True
        while i < n and toks[i] != ")":
            if expect_value and toks[i] != "?":
                return start, False
            if not expect_value and toks[i] != ",":
                return start, False
            expect_value = not expect_value
            i += 1
        if i >= n or expect_value:  # unterminated, empty "()" or trailing comma
            return start, False
        i += 1
        groups += 1
        if allow_many and i + 1 < n and toks[i] == "," and toks[i + 1] == "(":
            i += 1
            continue
        break
    return (i, True) if groups else (start, False)


def _join(toks: list[str]) -> str:
    """Join tokens with single spaces, except around punctuation where SQL is usually written tight."""
    parts: list[str] = []
    for tok in toks:
        if not parts:
            parts.append(tok)
        elif tok in (",", ")", ";", ".") or parts[-1].endswith(("(", ".")):
            parts[-1] += tok
        elif tok == "(" and parts[-1] not in _KEYWORDS_UP and parts[-1][-1:].isalnum():
            parts[-1] += tok  # function call: count(
        else:
            parts.append(tok)
    return " ".join(parts).rstrip(";").rstrip()


def normalise_sql(sql: str) -> str:
    """Return the shape of *sql*: the same text for every query that differs only in its values.

    Args:
        sql: one SQL statement, with literals inline (as ``sqlite3``'s trace callback reports it) or with
            placeholders in any common style.

    Returns:
        The normalised statement, e.g. ``SELECT name FROM products WHERE id IN (...)``.

    >>> normalise_sql("select * from t where a = 'it''s' -- note\\n and b in (1, 2,3)")
    'SELECT * FROM t WHERE a = ? AND b IN (...)'
    """
    return _join(_collapse_lists(_tokens(sql)))


_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_HEXID = re.compile(r"^(?=.*\d)[0-9a-fA-F]{12,}$")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?$")
_NUMLIST = re.compile(r"^-?\w+(?:,-?\w*)*$")


def _is_id(seg: str) -> bool:
    return bool(_NUM.match(seg) or _UUID.match(seg) or _HEXID.match(seg))


def normalise_url(url: str, method: str | None = None) -> str:
    """Return the shape of an HTTP call: method and path with ids replaced, query values replaced.

    Args:
        url: absolute or relative URL.
        method: HTTP method to prefix (``"GET"``); omitted when None.

    Returns:
        e.g. ``GET /products/{id}`` or ``GET /products?ids={ids}`` (any number of ids).

    >>> normalise_url("http://127.0.0.1:8001/products?ids=1,2,3", "get")
    'GET /products?ids={ids}'
    """
    parts = urlsplit(url)
    segs = ["{id}" if _is_id(s) else s for s in parts.path.split("/")]
    path = "/".join(segs) or "/"
    if parts.query:
        items = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if value in ("{id}", "{ids}"):  # already normalised
                items.append(f"{key}={value}")
            elif "," in value and all(_is_id(v) for v in value.split(",") if v):
                items.append(f"{key}={{ids}}")
            elif _is_id(value):
                items.append(f"{key}={{id}}")
            else:
                items.append(f"{key}={{v}}")
        path += "?" + "&".join(items)
    return f"{method.upper()} {path}" if method else path


_MORE = re.compile(r" \(\+(\d+) more\)$")
_KEY_SEG = re.compile(r"[:/._#\-{}]+")
#: multi-key Redis commands: how many arguments come before the keys (or fields) that make the batch
_MULTI_KEY = {"MGET": 0, "DEL": 0, "UNLINK": 0, "EXISTS": 0, "TOUCH": 0, "HMGET": 1, "SMISMEMBER": 1}


def _key_shape(arg: str) -> str:
    parts = _KEY_SEG.split(arg)
    seps = _KEY_SEG.findall(arg)
    out = ["?" if _is_id(p) else p for p in parts]
    return "".join(x for pair in zip(out, [*seps, ""], strict=True) for x in pair)


def _collapsed(shapes: list[str], sep: str) -> str:
    """*shapes* joined, each run of one shape written once and then ``…``."""
    out: list[str] = []
    last = None
    for shape in shapes:
        if shape == last:
            if out[-1] != "…":
                out.append("…")
            continue
        out.append(shape)
        last = shape
    return sep.join(out)


def _command_shape(command: str) -> str:
    name, *args = _MORE.sub("", command).split(" ")
    return _collapsed([name.upper(), *map(_key_shape, args)], " ")


def normalise_command(command: str) -> str:
    """The shape of a Redis command as :func:`labkit.nplusone.clients.command_text` writes it: id-like key
    segments become ``?`` and a run of arguments of one shape collapses to one and ``…``; a pipeline's commands
    likewise.

    >>> normalise_command("GET product:17"), normalise_command("MGET product:1 product:2 product:3")
    ('GET product:?', 'MGET product:? …')
    """
    if command.startswith("PIPELINE "):
        parts = _MORE.sub("", command[len("PIPELINE "):]).split("; ")
        return "PIPELINE " + _collapsed([_command_shape(p) for p in parts], "; ")
    return _command_shape(command)


def _redis_batch(statement: str) -> int:
    more = _MORE.search(statement)
    extra = int(more.group(1)) if more else 0
    body = _MORE.sub("", statement)
    if body.startswith("PIPELINE "):
        return len(body[len("PIPELINE "):].split("; ")) + extra
    name, *args = body.split(" ")
    skip = _MULTI_KEY.get(name.upper())
    return 0 if skip is None else max(0, len(args) - skip + extra)


_IN_LIST = re.compile(r"\bIN\s*\(([^()]*)\)", re.IGNORECASE)
_URL_LIST = re.compile(r"[?&][^=&]*=([^&#]*,[^&#]*)")


def batch_size(kind: str, statement: str) -> int:
    """How many values the largest list in *statement* carries: an ``IN (…)`` of placeholders or literals
    for SQL, a comma-separated query-string value of ids for HTTP (``"GET …/products?ids=1,2,3"``: 3);
    0 when there is none.

    A query sent once per chunk of k ids (k ≥ 2) is a batched load whatever k is; one sent per item carries
    a list of one at most.

    >>> batch_size("sql", "SELECT * FROM t WHERE id IN (?, ?, ?)"), batch_size("sql", "SELECT 1")
    (3, 0)
    """
    best = 0
    if kind == "redis":
        return _redis_batch(statement)
    if kind == "http":
        for m in _URL_LIST.finditer(statement):
            values = [v for v in m.group(1).split(",") if v]
            if all(_is_id(v) for v in values):
                best = max(best, len(values))
        return best
    for m in _IN_LIST.finditer(statement):
        toks = _tokens(m.group(1))
        if toks and all(t in ("?", ",") for t in toks):
            best = max(best, toks.count("?"))
    return best
