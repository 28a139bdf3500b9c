"""labkit.nplusone: the detector on sqlite3, SQLAlchemy (ORM lazy loads) and HTTP observers; shapes; budgets."""

from __future__ import annotations

import importlib
import os
import shutil
import sqlite3
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import ForeignKey, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, selectinload

from labkit.errors import BadInputError
from labkit.nplusone import (
    QueryBudgetExceeded,
    Report,
    assert_max_queries,
    check_budget,
    normalise_sql,
    normalise_url,
    watch,
)

pytest_plugins = ["pytester"]  # for test_pytest_fixture

HERE = Path(__file__).resolve()
SOURCE = HERE.read_text().splitlines()


def line_of(marker: str) -> str:
    """``file:line`` of the one source line of this file ending with ``# <marker>``."""
    hits = [i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return f"{HERE}:{hits[0]}"


class SubConnection(sqlite3.Connection):
    """Like labkit.toyshop.db.connect's connections: a subclass, so methods can be wrapped per instance."""


def make_db(factory: type[sqlite3.Connection] = sqlite3.Connection, orders: int = 12) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", factory=factory)
    conn.executescript(
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INT);"
        "CREATE TABLE items(id INTEGER PRIMARY KEY, order_id INT, sku TEXT);"
    )
    conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, 1) for i in range(orders)])
    conn.executemany("INSERT INTO items VALUES (?, ?, ?)", [(i, i % orders, f"s{i}") for i in range(3 * orders)])
    return conn


def export_naive(conn: sqlite3.Connection) -> list[tuple]:
    orders = conn.execute("SELECT id FROM orders WHERE customer = ?", (1,)).fetchall()
    out = []
    for (oid,) in orders:
        out += conn.execute("SELECT sku FROM items WHERE order_id = ?", (oid,)).fetchall()  # naive-items
    return sorted(out)


def export_batched(conn: sqlite3.Connection) -> list[tuple]:
    ids = [oid for (oid,) in conn.execute("SELECT id FROM orders WHERE customer = ?", (1,))]
    marks = ",".join("?" * len(ids))
    return sorted(conn.execute(f"SELECT sku FROM items WHERE order_id IN ({marks})", ids).fetchall())


# --- raw sqlite3 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("factory, timing", [(sqlite3.Connection, "vm"), (SubConnection, "call")])
def test_sqlite_nplusone_found_with_count_and_call_site(factory: type, timing: str) -> None:
    # GIVEN a customer with 12 orders, WHEN the naive export runs under watch
    conn = make_db(factory, orders=12)
    with watch(conn) as w:
        export_naive(conn)
    report = w.report
    # THEN one query for the orders and one per order, the per-order shape is the one suspect
    assert report.count == 13
    assert [s.shape for s in report.suspects] == ["SELECT sku FROM items WHERE order_id = ?"]
    suspect = report.suspects[0]
    assert suspect.count == 12
    assert suspect.site == line_of("naive-items")
    assert {q.timing for q in report.queries} == {timing}
    assert all(q.duration_ns >= 0 for q in report.queries)
    assert 0 < report.query_share <= 1


# --- any library: call sites by location ------------------------------------------------------------------
_FAKE_ORM = {
    "__init__.py": "from .backend import each_row\nfrom .models import Model, Session\n",
    "backend.py": (
        "def fetch_one(conn, sql, params):\n"
        "    cursor = conn.execute(sql, params)\n"
        "    return cursor.fetchone()\n"
        "\n"
        "def each_row(conn, sql, keys):\n"
        "    for key in keys:\n"
        "        yield fetch_one(conn, sql, (key,))\n"
    ),
    "models.py": (
        "from . import backend\n"
        "\n"
        "class Session:\n"
        "    def __init__(self, conn):\n"
        "        self.conn = conn\n"
        "\n"
        "class Model:\n"
        "    table = ''\n"
        "\n"
        "    @classmethod\n"
        "    def get(cls, session, pk):\n"
        "        return backend.fetch_one(session.conn, f'SELECT * FROM {cls.table} WHERE order_id = ?', (pk,))\n"
    ),
}


@pytest.fixture
def installed_orm():
    """A small ORM the detector has no special knowledge of, installed in this interpreter's site-packages
    (outside the repository, as ``pip install`` would put it), and removed afterwards."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    name = f"labkit_test_orm_{os.getpid()}"
    package = purelib / name
    package.mkdir()
    try:
        for file, text in _FAKE_ORM.items():
            (package / file).write_text(text)
        importlib.invalidate_caches()
        module = importlib.import_module(name)
        assert Path(module.__file__).resolve().is_relative_to(purelib.resolve())
        yield module
    finally:
        shutil.rmtree(package)
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]


@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
def test_the_call_site_is_the_users_line_whatever_the_orm(installed_orm, factory: type) -> None:
    # GIVEN an ORM model read one order at a time, the detector watching the sqlite3 connection underneath
    conn = make_db(factory, orders=12)

    class Item(installed_orm.Model):
        table = "items"

    session = installed_orm.Session(conn)
    with watch(conn) as w:
        rows = [Item.get(session, oid) for oid in range(12)]  # any-orm
    # THEN the N+1 is found with its count, and its site is this line, not one inside the ORM's backend
    assert len(rows) == 12
    (suspect,) = w.report.suspects
    assert suspect.count == 12 and suspect.site == line_of("any-orm")
    # AND skip= still moves the site further out (here: past this test file, to pytest's own frames, which
    # are library code too, so nothing is left; "<string>": a pytest-xdist worker runs from `python -c`)
    with watch(conn, skip=(str(HERE), "<string>")) as w2:
        Item.get(session, 1)
    assert w2.report.queries[0].site == "?:0"


@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
def test_sqlite_batched_is_clean_and_same_answer(factory: type) -> None:
    conn = make_db(factory)
    expected = export_naive(conn)
    with watch(conn) as w:
        got = export_batched(conn)
    assert got == expected
    assert w.report.count == 2
    assert w.report.clean
    assert "SELECT sku FROM items WHERE order_id IN (...)" in [s.shape for s in w.report.shapes]


@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
def test_watch_restores_connection_and_nests(factory: type) -> None:
    conn = make_db(factory)
    with watch(conn, threshold=20) as outer:
        conn.execute("SELECT 1")
        with watch(conn) as inner:
            export_naive(conn)
    assert inner.report.count == 13 and outer.report.count == 14
    assert inner.report.suspects and outer.report.clean  # threshold 20 > 12 repeats
    if factory is SubConnection:
        assert not {"execute", "cursor", "executemany", "executescript"} & set(vars(conn))
    # after the block nothing is recorded and the connection works as before
    with watch(conn) as again:
        pass
    conn.execute("SELECT 2")
    assert again.report.count == 0


def test_cursor_iteration_time_is_counted_on_subclass_connection() -> None:
    ticks = iter(range(0, 10_000, 10))
    conn = make_db(SubConnection)
    with watch(conn, clock=lambda: next(ticks)) as w:
        rows = list(conn.execute("SELECT sku FROM items"))
    assert len(rows) == 36
    (q,) = w.report.queries
    # execute (10 ns) + 36 rows and the final StopIteration, each one fake tick of 10 ns
    assert q.duration_ns == 10 * (1 + 36 + 1)


def test_decorator_form_and_label() -> None:
    conn = make_db(SubConnection)

    @watch(conn)
    def handler() -> list[tuple]:
        return export_naive(conn)

    handler()
    handler()
    w = handler.watch  # type: ignore[attr-defined]
    assert len(w.reports) == 2
    assert w.report.label.endswith("handler")
    assert w.report.suspects[0].count == 12


def test_rejects_unknown_target_and_bad_threshold() -> None:
    with pytest.raises(BadInputError, match="observers"):
        watch(object()).start()
    with pytest.raises(BadInputError, match="threshold"):
        watch(make_db(), threshold=-1)
    with pytest.raises(BadInputError, match="at least one target"):
        watch()


# --- SQLAlchemy: an N+1 the ORM hides ---------------------------------------------------------------------
class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    id: Mapped[int] = mapped_column(primary_key=True)
    orders: Mapped[list[Order]] = relationship(back_populates="customer")  # lazy="select": the default


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"))
    customer: Mapped[Customer] = relationship(back_populates="orders")
    items: Mapped[list[Item]] = relationship()


class Item(Base):
    __tablename__ = "items"
    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"))
    sku: Mapped[str]


@pytest.fixture
def engine():
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as s:
        for c in range(2):
            cust = Customer(id=c + 1)
            for o in range(8):
                cust.orders.append(Order(items=[Item(sku=f"c{c}o{o}i{i}") for i in range(3)]))
            s.add(cust)
        s.commit()
    yield engine
    engine.dispose()


def test_sqlalchemy_lazy_relationship_nplusone_found(engine) -> None:
    with Session(engine) as s, watch(engine) as w:
        customer = s.get(Customer, 1)
        skus = [i.sku for o in customer.orders for i in o.items]  # orm-lazy
    assert len(skus) == 24
    report = w.report
    (suspect,) = report.suspects
    assert suspect.count == 8  # one lazy load of .items per order
    assert "FROM items WHERE ? = items.order_id" in suspect.shape
    assert suspect.site == line_of("orm-lazy")
    assert report.count == 1 + 1 + 8  # customer, its orders, items per order
    assert {q.timing for q in report.queries} == {"hook"}


def test_sqlalchemy_selectinload_is_clean(engine) -> None:
    stmt = select(Customer).where(Customer.id == 1).options(selectinload(Customer.orders).selectinload(Order.items))
    with Session(engine) as s, watch(engine) as w:
        customer = s.scalars(stmt).one()
        skus = [i.sku for o in customer.orders for i in o.items]
    assert len(skus) == 24
    assert w.report.clean
    assert w.report.count == 3
    assert any("IN (...)" in s.shape for s in w.report.shapes)


# --- HTTP clients with observers --------------------------------------------------------------------------
class FakeCatalog:
    """The observer protocol of labkit.toyshop.catalog.CatalogClient, without HTTP."""

    def __init__(self, clock_step: int = 0) -> None:
        self.observers: list = []

    def _notify(self, url: str, duration_ns: int) -> None:
        __tracebackhide__ = True  # a transport helper: the call site is its caller's caller
        for obs in list(self.observers):
            obs("GET", url, duration_ns)

    def product(self, pid: int) -> dict:
        __tracebackhide__ = True
        self._notify(f"http://127.0.0.1:9/products/{pid}", 1_000)
        return {"id": pid}

    def products(self, ids: list[int]) -> list[dict]:
        __tracebackhide__ = True
        self._notify(f"http://127.0.0.1:9/products?ids={','.join(map(str, ids))}", 3_000)
        return [{"id": i} for i in ids]


def test_http_observer_shapes_and_exact_times_with_fake_clock() -> None:
    now = [0]

    def clock() -> int:
        now[0] += 500
        return now[0]

    cat = FakeCatalog()
    with watch(cat, clock=clock) as w:
        for pid in range(7):
            cat.product(pid)  # per-product
        cat.products([1, 2, 3])
        cat.products([4, 5])
    assert cat.observers == []
    report = w.report
    shapes = {s.shape: s for s in report.shapes}
    assert set(shapes) == {"GET /products/{id}", "GET /products?ids={ids}"}
    assert shapes["GET /products/{id}"].count == 7 and shapes["GET /products/{id}"].suspect
    assert shapes["GET /products/{id}"].total_ns == 7_000
    assert shapes["GET /products/{id}"].site == line_of("per-product")
    assert shapes["GET /products?ids={ids}"].count == 2 and not shapes["GET /products?ids={ids}"].suspect
    # 9 observer calls + start + stop = 11 clock reads of 500 ns: block is 10 × 500 ns wide
    assert report.wall_ns == 5_000
    # an observed call started at clock() - duration: windows [-500, 500], [0, 1000] … [1500, 4500] ns
    assert report.queries[0].start_ns == -500 and report.queries[-1].start_ns == 1_500
    assert report.query_ns == 5_000 and report.query_share == 1.0
    assert report.shapes[0].shape == "GET /products/{id}"  # suspect first


def test_query_share_merges_overlaps() -> None:
    from labkit.nplusone import Query

    def q(start: int, dur: int) -> Query:
        return Query("sql", "t", "s", "", "S", start, dur, "x:1", "call")

    report = Report(queries=(q(0, 10), q(5, 10), q(30, 10)), wall_ns=100)
    assert report.query_ns == 25
    assert report.query_share == pytest.approx(0.25)


# --- shapes -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sql, shape",
    [
        ("select * from t where name = 'O''Brien' and note = 'a -- b /* c */'", "SELECT * FROM t WHERE name = ? AND note = ?"),
        ("SELECT a FROM t WHERE x = 42 AND y = -3.5e-2 AND z = .5 AND h = 0x1F", "SELECT a FROM t WHERE x = ? AND y = ? AND z = ? AND h = ?"),
        ("select a - 1 from t", "SELECT a - ? FROM t"),
        ("select * from t where id in (1, 2, 3)", "SELECT * FROM t WHERE id IN (...)"),
        ("select * from t where id IN (?,?,?,?,?,?,?,?,?,?,?,?)", "SELECT * FROM t WHERE id IN (...)"),
        ("select * from t where id in ('a', 'b''c')", "SELECT * FROM t WHERE id IN (...)"),
        ("SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE k = 3)", "SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE k = ?)"),
        ("-- leading\nSELECT /* inline */ a\n  FROM   t -- trailing\n WHERE b = :b", "SELECT a FROM t WHERE b = ?"),
        ("SeLeCt A, b FrOm T wHeRe C = %s AND d = %(d)s AND e = $1 AND f = @f", "SELECT a, b FROM t WHERE c = ? AND d = ? AND e = ? AND f = ?"),
        ('select "Mixed ""Quoted""" from t', 'SELECT "Mixed ""Quoted""" FROM t'),
        ("insert into t (a, b) values (1, 'x'), (2, 'y');", "INSERT INTO t(a, b) VALUES (...)"),
        ("select count(*) from t", "SELECT count(*) FROM t"),
    ],
)
def test_normalise_sql(sql: str, shape: str) -> None:
    assert normalise_sql(sql) == shape


def test_in_lists_of_any_length_share_a_shape() -> None:
    shapes = {normalise_sql(f"select * from t where id in ({','.join(map(str, range(n)))})") for n in (1, 2, 50)}
    assert len(shapes) == 1


def test_multiline_and_case_variants_share_a_shape() -> None:
    a = "SELECT name\n  FROM products\n WHERE id = 7"
    b = "select   NAME from PRODUCTS where ID=8 -- by id"
    assert normalise_sql(a) == normalise_sql(b)


@pytest.mark.parametrize(
    "url, shape",
    [
        ("http://127.0.0.1:8001/products/17", "GET /products/{id}"),
        ("/products?ids=1,2,3", "GET /products?ids={ids}"),
        ("/products?ids=4", "GET /products?ids={id}"),
        ("/customers/42/export?n1=naive", "GET /customers/{id}/export?n1={v}"),
        ("/things/550e8400-e29b-41d4-a716-446655440000", "GET /things/{id}"),
        ("/health", "GET /health"),
    ],
)
def test_normalise_url(url: str, shape: str) -> None:
    assert normalise_url(url, "get") == shape


# --- rendering, persistence -------------------------------------------------------------------------------
def test_text_and_html_render_worst_first(tmp_path: Path) -> None:
    conn = make_db(SubConnection)
    with watch(conn) as w:
        export_naive(conn)
    text = str(w.report)
    html = w.report._repr_html_()
    assert text.index("order_id = ?") < text.index("customer = ?")
    assert "!!" in text and "1 suspect" in text
    assert html.index("order_id = ?") < html.index("customer = ?") and "suspect" in html
    frame = w.report.to_frame()
    assert len(frame) == 13 and frame["suspect"].sum() == 12
    assert list(w.report.shapes_frame()["count"]) == [12, 1]
    path = w.report.save(tmp_path / "r.json")
    again = Report.load(path)
    assert again.queries == w.report.queries and again.fingerprint
    # the shared result format: a kind + version header, refused by the loaders of other kinds
    from labkit.errors import ResultsError
    from labkit.latency import Samples
    from labkit.results import read_json

    assert read_json(path)["kind"] == Report.KIND and read_json(path)["version"] == Report.VERSION
    with pytest.raises(ResultsError, match="r.json"):
        Samples.load(path)


# --- budgets ----------------------------------------------------------------------------------------------
def test_assert_max_queries_fails_with_suspects_in_message() -> None:
    conn = make_db(SubConnection)
    with pytest.raises(QueryBudgetExceeded) as info, assert_max_queries(5, conn):
        export_naive(conn)
    message = str(info.value)
    assert "13 queries, budget 5" in message
    assert "12× 'SELECT sku FROM items WHERE order_id = ?'" in message
    assert line_of("naive-items") in message
    assert info.value.report.count == 13


def test_assert_max_queries_passes_within_budget_and_can_forbid_suspects() -> None:
    conn = make_db(SubConnection)
    with assert_max_queries(2, conn) as w:
        export_batched(conn)
    assert w.report.count == 2
    with pytest.raises(QueryBudgetExceeded, match="N\\+1 suspect"), assert_max_queries(None, conn,
                                                                          allow_suspects=False):
        export_naive(conn)
    check_budget(w.report, 2, allow_suspects=False)  # no raise


def test_pytest_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["labkit.nplusone.pytest_plugin"]')
    pytester.makepyfile(
        """
        import sqlite3

        def _db():
            c = sqlite3.connect(":memory:")
            c.execute("create table t(id integer primary key)")
            c.executemany("insert into t values (?)", [(i,) for i in range(10)])
            return c

        def test_loop(query_budget):
            c = _db()
            with query_budget(c):
                for i in range(10):
                    c.execute("select id from t where id = ?", (i,)).fetchone()

        def test_batched(query_budget):
            c = _db()
            with query_budget(c, max_queries=1):
                c.execute("select id from t where id in (1, 2, 3)").fetchall()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*QueryBudgetExceeded*N+1 suspect*", "*10× 'SELECT id FROM t WHERE id = ?'*"])


# --- the toyshop export (in process, fake catalog) --------------------------------------------------------
class CursorCallingConnection(sqlite3.Connection):
    """A subclass whose execute goes through self.cursor(), as labkit.toyshop.db's does while tracking."""

    def execute(self, sql: str, parameters=(), /):  # type: ignore[override]
        return self.cursor().execute(sql, parameters)


def test_subclass_execute_via_own_cursor_is_recorded_once() -> None:
    conn = make_db(CursorCallingConnection)
    with watch(conn) as w:
        export_naive(conn)
    assert w.report.count == 13


@pytest.fixture(scope="module")
def toyshop():
    from labkit.toyshop import catalog, dataset, db

    path = dataset.ensure("small")
    conn = db.connect(path)
    yield conn, catalog.FakeCatalog.from_db(path)
    conn.close()


def test_toyshop_export_naive_suspects_and_batched_clean(toyshop) -> None:
    from labkit.toyshop import dataset, export
    from labkit.trace import collect

    conn, cat = toyshop
    orders = dataset.LADDER[5]  # a ladder customer: 10 orders × 4 items
    items = orders * dataset.ITEMS_PER_LADDER_ORDER
    with collect() as trace, watch(conn, cat) as w:
        naive = export.export_naive(conn, cat, 5)
    report = w.report
    db_count = {m.name: m for m in trace.metrics()}["db"].count
    assert db_count == 2 + orders + items  # the service's own accounting still works underneath
    assert report.count == 2 + orders + items + items
    counts = {s.shape: s.count for s in report.suspects}
    assert counts == {
        "SELECT sku, name FROM products WHERE id = ?": items,
        "GET /products/{id}": items,
        "SELECT line_no, product_id, quantity, unit_price_cents FROM order_items WHERE order_id = ? ORDER BY "
        "line_no": orders,
    }
    assert all(s.site.rsplit(":", 1)[0].endswith("export.py") for s in report.suspects)
    for variant in (export.export_batched, export.export_join):
        with watch(conn, cat) as w:
            assert variant(conn, cat, 5) == naive
        assert w.report.clean and w.report.count <= 6


# --- the shape cache key never changes a shape --------------------------------------------------------------
_PIECES = ["select", "SELECT", "a", "t1", "x.b", "from t", "where", "=", "-", "1", "42", "3.5", ".5", "'s'",
           "'it''s'", "x'AB'", '"q 1"', "in (1, 2)", "IN (?,?)", ",", "(", ")", "-- c 1\n", "/* 2 */", "\n", "  ",
           ":name", "%s", "?", "and", "values (1,'a'),(2,'b')"]


@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=14))
@settings(max_examples=300, deadline=None)
def test_shape_cache_key_agrees_with_full_normalisation(pieces: list[str]) -> None:
    from labkit.nplusone.report import shape_of

    sql = " ".join(pieces)
    assert shape_of("sql", sql) == normalise_sql(sql)


@given(st.lists(st.sampled_from(["products", "12", "v2", "abc", "7,8,9", "x1"]), min_size=1, max_size=4),
       st.lists(st.tuples(st.sampled_from(["ids", "n", "q"]), st.sampled_from(["1", "1,2", "a", "v2", ""])),
                max_size=3))
@settings(max_examples=200, deadline=None)
def test_url_cache_key_agrees_with_full_normalisation(segments: list[str], query: list[tuple[str, str]]) -> None:
    from labkit.nplusone.report import shape_of

    url = "http://127.0.0.1:1/" + "/".join(segments) + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
    assert shape_of("http", f"GET {url}") == normalise_url(url, "GET")


# --- the recorder's buffer ------------------------------------------------------------------------------------
def test_duration_slot_found_when_another_thread_appended_in_between() -> None:
    from labkit.nplusone.taps import DUR, REC, _slot

    mine, other = "SELECT 1", "SELECT 2"
    buf: list = []
    site = (None, 0, None, 0)  # site and caller
    buf += ("m", mine, None, 100, 5, site)
    assert _slot(buf, mine, 100) == DUR
    buf += ("m", other, None, 100, 7, site)  # same start, another statement: not mistaken for mine
    buf += ("m", other, None, 101, 9, site)
    assert _slot(buf, mine, 100) == DUR
    assert _slot(buf, other, 101) == 2 * REC + DUR
    assert _slot(buf, "SELECT 3", 100) == -1


@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
def test_call_sites_stay_right_when_calls_alternate_between_lines(factory: type) -> None:
    # sites found last are reused only for the same call expression of the same frame: alternating lines,
    # and a helper one frame deeper, each keep their own site
    cat = FakeCatalog()
    conn = make_db(factory)

    def via_helper(pid: int) -> None:
        cat.product(pid)  # http-helper
        conn.execute("SELECT 2").fetchall()  # sql-helper

    with watch(cat, conn) as w:
        for pid in range(4):
            cat.product(pid)  # http-a
            conn.execute("SELECT 1").fetchall()  # sql-a
            via_helper(pid)
            cat.product(pid)  # http-b
    sites = [q.site for q in w.report.queries]
    expected = [line_of(m) for m in ("http-a", "sql-a", "http-helper", "sql-helper", "http-b")]
    assert sites == expected * 4


@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
def test_a_held_site_keeps_each_caller_apart(factory: type) -> None:
    # GIVEN a helper called from two lines, and a generator resumed from two lines, each sending one query
    # from the same line of its own (a new activation of the helper may reuse a freed frame's memory; the
    # generator's one frame is resumed by two callers)
    conn = make_db(factory)

    def helper() -> None:
        conn.execute("SELECT 1").fetchall()  # helper-query

    def rows():  # type: ignore[no-untyped-def]
        while True:
            conn.execute("SELECT 2").fetchall()  # gen-query
            yield

    gen = rows()
    # WHEN the calls alternate between the callers' lines, in an order that changes (so that the site expected
    # next is sometimes the other caller's)
    with watch(conn) as w:
        for i in range(4):
            helper()  # helper-from-a
            helper()  # helper-from-b
            if i % 2:
                next(gen)  # gen-from-b
            next(gen)  # gen-from-a
            if not i % 2:
                next(gen)  # gen-from-b-later
    # THEN each query keeps its own caller, not the one its site was found with first
    got = [(q.site, q.caller) for q in w.report.queries]
    helpers = [(line_of("helper-query"), line_of("helper-from-a")), (line_of("helper-query"), line_of("helper-from-b"))]
    gen_a, gen_b, gen_b_later = ((line_of("gen-query"), line_of(m)) for m in ("gen-from-a", "gen-from-b", "gen-from-b-later"))
    assert got == [*helpers, gen_a, gen_b_later, *helpers, gen_b, gen_a] * 2


# --- what counts as one loop (issue 27) ---------------------------------------------------------------------
@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
def test_same_sql_from_two_lines_is_two_places_not_one_loop(factory: type) -> None:
    # GIVEN one per-order query sent once from each of two lines, then the same from one line in a loop of 2
    conn = make_db(factory)
    sql = "SELECT sku FROM items WHERE order_id = ?"
    with watch(conn) as w:
        conn.execute(sql, (1,)).fetchall()
        conn.execute(sql, (2,)).fetchall()
    with watch(conn) as w2:
        for oid in (1, 2):
            conn.execute(sql, (oid,)).fetchall()  # loop-of-two
    # THEN two lines are no N+1 at the default threshold; a loop of two is, at its line
    assert w.report.clean and w.report.shapes[0].count == 2 and w.report.shapes[0].repeats == 1
    (suspect,) = w2.report.suspects
    assert suspect.repeats == 2 and suspect.site == line_of("loop-of-two")


def _items_of(conn: sqlite3.Connection, oid: int) -> list[tuple]:
    return conn.execute("SELECT sku FROM items WHERE order_id = ?", (oid,)).fetchall()  # helper-line


def test_a_helper_is_one_loop_only_when_one_line_calls_it_repeatedly() -> None:
    conn = make_db()
    with watch(conn) as w:  # called from two lines: two places
        _items_of(conn, 1)
        _items_of(conn, 2)
    with watch(conn) as w2:  # called from one line in a loop: an N+1 at the helper's line
        for oid in range(4):
            _items_of(conn, oid)
    assert w.report.clean
    (suspect,) = w2.report.suspects
    assert suspect.site == line_of("helper-line") and suspect.repeats == 4
    assert {q.caller for q in w2.report.queries if "items" in q.statement} == {
        f"{HERE}:{int(line_of('helper-line').rsplit(':', 1)[1]) + 10}"}


@pytest.mark.parametrize("factory", [sqlite3.Connection, SubConnection])
@pytest.mark.parametrize("chunk", [2, 3, 5])
def test_chunked_in_lists_are_batches_whatever_the_chunk(factory: type, chunk: int) -> None:
    # GIVEN 12 order ids fetched in chunks of k from one line (the last chunk may hold a single id)
    conn = make_db(factory, orders=12)
    ids = list(range(12))
    with watch(conn) as w:
        for i in range(0, len(ids), chunk):
            part = ids[i:i + chunk]
            conn.execute(f"SELECT sku FROM items WHERE order_id IN ({','.join('?' * len(part))})", part).fetchall()
    with watch(conn) as w2:  # the same shape with one id per query is one query per item
        for oid in ids:
            conn.execute("SELECT sku FROM items WHERE order_id IN (?)", (oid,)).fetchall()  # in-of-one
    # THEN the chunks are batching, however many there are; lists of one are an N+1
    (shape,) = w.report.shapes
    assert shape.count == -(-12 // chunk) and shape.repeats == 0 and w.report.clean
    (suspect,) = w2.report.suspects
    assert suspect.count == 12 and suspect.site == line_of("in-of-one")


def test_a_query_sent_while_a_loop_fetches_its_next_item_is_the_iterables_load(installed_orm) -> None:
    # GIVEN a library iterator that loads one chunk (of one row) per step, and a loop over it
    conn = make_db(orders=6)
    with watch(conn) as w:
        for _row in installed_orm.each_row(conn, "SELECT id FROM orders WHERE id = ?", range(6)):
            pass  # the queries are the iterable's own loads, sent from the `for` line: not the body's
    (shape,) = w.report.shapes
    assert shape.count == 6 and not shape.suspect and all(q.fetch for q in w.report.queries)


def test_report_files_of_versions_1_and_2_still_load(tmp_path: Path) -> None:
    conn = make_db()
    with watch(conn) as w:
        export_naive(conn)
    data = w.report.to_dict()
    assert data["version"] == 3 and data["queries"][1]["caller"] and data["queries"][1]["site_at"]
    for q in data["queries"]:
        del q["site_at"], q["caller_at"]
    data["version"] = 2
    old = Report.from_dict(data)
    assert old.queries[1].site_at == "" and old.suspects[0].count == 12  # grouped by line, as version 2 did
    for q in data["queries"]:
        del q["caller"], q["fetch"]
    data["version"] = 1
    old = Report.from_dict(data)
    assert old.queries[1].caller == "" and not old.queries[1].fetch
    assert old.suspects[0].count == 12  # the loop's one line, one (unknown) caller


def test_a_chain_of_two_lookups_on_one_line_is_two_places_and_a_loop_is_one() -> None:
    # GIVEN one line that runs the same query twice as a chain, and one that runs it twice in a comprehension
    conn = make_db()

    def name(pid: int) -> int:
        return conn.execute("SELECT id FROM orders WHERE id = ?", (pid,)).fetchone()[0]

    with watch(conn) as w:
        _ = name(name(1))                      # two calls of one function, two expressions: not a loop
    assert w.report.clean, str(w.report)
    with watch(conn) as w:
        _ = [name(p) for p in (1, 2)]          # one expression run twice
    assert [s.repeats for s in w.report.suspects] == [2], str(w.report)


def test_http_client_module_sees_urllib_and_requests_from_their_calling_line() -> None:
    import http.client
    import http.server
    import threading
    import urllib.request

    import requests

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    put, get = http.client.HTTPConnection.putrequest, http.client.HTTPConnection.getresponse
    try:
        with watch(http.client) as w:
            for i in range(3):
                urllib.request.urlopen(f"{base}/items/{i}").read()  # per-item
            requests.get(f"{base}/items?ids=1,2", timeout=5)
        shapes = {s.shape: s for s in w.report.shapes}
        assert set(shapes) == {"GET /items/{id}", "GET /items?ids={ids}"}
        assert shapes["GET /items/{id}"].count == 3 and shapes["GET /items/{id}"].suspect
        assert shapes["GET /items/{id}"].site == line_of("per-item")
        assert all(q.kind == "http" and q.duration_ns > 0 for q in w.report.queries)
        # the tap is off after the block: the class has its own methods back, and nothing more is recorded
        assert (http.client.HTTPConnection.putrequest, http.client.HTTPConnection.getresponse) == (put, get)
        urllib.request.urlopen(f"{base}/items/9").read()
        assert w.report.count == 4
    finally:
        server.shutdown()
