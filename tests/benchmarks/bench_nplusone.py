"""Benchmark: the N+1 detector's overhead, and naive vs batched export end to end at two network distances.

Run it alone (benchmarks never overlap):

    flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_nplusone.py [--rounds 20] [--quick]
        [--django-only]

1. **Detector overhead** — first the parts: the extra cost per recorded SQL query and per catalog call in
   tight loops (recording only: a report's ``Query`` values are built when it is first read, and that read is
   shown separately), and the fixed cost of an empty ``with watch(conn, catalog): pass`` block. Then the
   whole: the export of the ladder customer with 200 items, in process (toyshop connection + the real catalog
   process over loopback), run bare and under ``labkit.nplusone.watch``, interleaved by ``labkit.compare``
   (a fixed 8 × ``--rounds`` rounds, as loopback round trips make it noisy). Goal: ≤ 5 % of an export request. Also shown for a
   worst case: the same export against the in-process fake catalog (SQLite only, no network at all), where the
   detector's share is largest and its in-situ cost per event (cold caches, the export's objects around) is
   above the tight-loop figure.
2. **End to end** — ``GET /customers/1/export?n1=naive`` vs ``?n1=batched`` (and ``join``) over HTTP,
   interleaved, with the catalog on loopback and with an *emulated* 0.5 ms catalog round trip
   (``labkit.service.start(catalog_delay_ms=0.5)``), and 1 ms as a control; the single catalog call is measured
   at each distance so an emulation that did not take effect shows. Printed as ratios with intervals and verdicts.
3. **Django, against django-zeal** — zeal's own benchmark workload (its ``tests/test_performance.py``: 10 users
   who all follow each other, a profile and 10 posts each; 433 queries), bare vs ``watch(django.db.connection)``
   (and vs the raw sqlite3 connection's tap, the route Django had before), interleaved; then bare vs zeal as a
   project has it (its patches, switched on for its runs only by ``ZealSwitch``, plus ``zeal_context(),
   zeal_ignore()`` as zeal's benchmark runs it) and zeal vs labkit directly, with a control row for what
   switching costs a run by itself; then both inside Django with zeal's patches in place (zeal's context alone). Goal: labkit's watched ÷ unwatched ≤ zeal's, read from the direct
   comparison. (Before ``ZealSwitch``, zeal was patched in after the warm-up run, so its reverse-foreign-key and
   many-to-many checks never ran: the managers Django had cached were unpatched. The switch now checks that
   zeal catches both, with its patches on and only then.)
"""

from __future__ import annotations

import argparse
import http.client
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from labkit.measure.comparison import compare
from labkit.measure.stats import format_duration
from labkit.nplusone import watch
from labkit.trace import parse_server_timing

CUSTOMER = 1  # ladder: 50 orders × 4 items


class KeepAlive:
    """One persistent loopback HTTP/1.1 connection; ``get(path)`` returns (status, headers, body)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        assert parts.hostname in ("127.0.0.1", "localhost"), base_url
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        body = resp.read()
        return resp.status, dict(resp.getheaders()), body


def per_call_overhead(conn: object, fake: object, rounds: int) -> tuple[float, float, float, float]:
    """Extra ns per recorded SQL query and per recorded catalog call (tight loops of 200, interleaved), and
    per query for reading the report afterwards (``report.queries`` is built on first read, off the block)."""
    import numpy as np

    sql = "SELECT sku, name FROM products WHERE id = ?"
    w_sql, w_http = watch(conn), watch(fake)

    def sql_bare() -> None:
        for i in range(1, 201):
            conn.execute(sql, (i,)).fetchone()  # type: ignore[attr-defined]

    def sql_watched() -> None:
        with w_sql:
            sql_bare()

    def sql_read() -> None:
        with w_sql:
            sql_bare()
        w_sql.report.queries  # noqa: B018 - the read is what is measured

    def http_bare() -> None:
        for i in range(1, 201):
            fake.get(i)  # type: ignore[attr-defined]

    def http_watched() -> None:
        with w_http:
            http_bare()

    def http_read() -> None:
        with w_http:
            http_bare()
        w_http.report.queries  # noqa: B018

    out = []
    for bare, watched in ((sql_bare, sql_watched), (http_bare, http_watched), (sql_watched, sql_read),
                          (http_watched, http_read)):
        c = compare(bare, watched, rounds=rounds, min_sample_time=0.01)
        out.append(float(np.median(c.candidate_ns) - np.median(c.baseline_ns)) / 200)
    return out[0], out[1], out[2], out[3]


def empty_block_ns(conn: object, catalog: object) -> float:
    """The fixed cost of a block: ``with watch(conn, catalog): pass`` (best of 7 × 2000)."""
    import timeit

    w = watch(conn, catalog)

    def empty() -> None:
        with w:
            pass

    return min(timeit.repeat(empty, number=2000, repeat=7)) / 2000 * 1e9


def overhead(svc: object, rounds: int) -> None:
    from labkit.toyshop import catalog as cat_mod
    from labkit.toyshop import db
    from labkit.toyshop.export import export_batched, export_naive

    conn = db.connect(svc.db_path)  # type: ignore[attr-defined]
    print("1. detector overhead")
    fake = cat_mod.FakeCatalog.from_db(svc.db_path)  # type: ignore[attr-defined]
    per_sql, per_http, read_sql, read_http = per_call_overhead(conn, fake, rounds)
    print(f"   per recorded call (tight loops, recording only): SQL query {format_duration(per_sql)}, "
          f"catalog call {format_duration(per_http)}; reading the report afterwards (Query values are built "
          f"on first read): {format_duration(read_sql)} per SQL query, {format_duration(read_http)} per call")
    print("   whole export of customer 1 (50 orders × 4 items), in process, bare vs under watch():")
    with cat_mod.CatalogClient(svc.catalog_url) as real:  # type: ignore[attr-defined]
        print(f"   empty block `with watch(conn, catalog): pass`: {format_duration(empty_block_ns(conn, real))}")
        for label, catalog in (("real catalog on loopback", real), ("fake catalog, SQLite only (worst case)", fake)):
            for fn in (export_naive, export_batched):
                w = watch(conn, catalog)

                def bare(fn=fn, catalog=catalog) -> None:
                    fn(conn, catalog, CUSTOMER)

                def watched(fn=fn, catalog=catalog, w=w) -> None:
                    with w:
                        fn(conn, catalog, CUSTOMER)

                # the real-catalog export is noisy (loopback round trips, a second process: an A/A comparison
                # spreads ±2 % over 40 rounds): a fixed 8 × rounds there, so the interval can be held to the goal
                n = 8 * rounds if catalog is real else 2 * rounds
                c = compare(bare, watched, rounds=n, max_rounds=n if catalog is real else None, max_time=60.0,
                            names=("bare", "watched"), min_sample_time=0.02)
                rep = w.report
                n_sql = sum(q.kind == "sql" for q in rep.queries) if rep else 0
                n_http = (rep.count - n_sql) if rep else 0
                base = sorted(c.baseline_ns)[len(c.baseline_ns) // 2]
                implied = (n_sql * per_sql + n_http * per_http) / base
                print(f"   {fn.__name__:>15} · {label}: {n_sql} SQL + {n_http} calls, bare {format_duration(base)}; "
                      f"implied by the per-call cost {implied:+.1%}; measured watched/bare = {c.ratio:.3f} "
                      f"({c.ci_label} {c.ci[0]:.3f}–{c.ci[1]:.3f}, {len(c.baseline_ns)} rounds), verdict: {c.verdict}")
    conn.close()


def end_to_end(delay_ms: float, rounds: int, size: str) -> None:
    from labkit.service import start

    where = "loopback" if not delay_ms else f"emulated {delay_ms:g} ms catalog round trip"
    print(f"2. end to end, catalog at {where} (GET /customers/{CUSTOMER}/export)")
    with start(size=size, catalog_delay_ms=delay_ms) as svc:
        from labkit.toyshop.catalog import CatalogClient

        with CatalogClient(svc.catalog_url) as cat:
            one = []
            for i in range(60):
                t0 = time.perf_counter_ns()
                cat.get(1 + i % 50)
                one.append(time.perf_counter_ns() - t0)
        print(f"   measured single catalog call from here: median {format_duration(sorted(one[10:])[25])}")
        client = KeepAlive(svc.url)
        counts = {}
        for variant in ("naive", "batched", "join"):
            for _ in range(3):  # warm-up: statement caches, keep-alive connections, first-touch pages
                status, headers, _body = client.get(f"/customers/{CUSTOMER}/export?n1={variant}")
                assert status == 200, (variant, status)
            st = parse_server_timing(headers.get("server-timing") or headers.get("Server-Timing", ""))
            counts[variant] = (st["db"].count if "db" in st else None, st["catalog"].count if "catalog" in st else None)

        def request(variant: str) -> None:
            status, _h, _b = client.get(f"/customers/{CUSTOMER}/export?n1={variant}")
            if status != 200:
                raise RuntimeError(f"export answered {status}")

        for cand in ("batched", "join"):
            c = compare(lambda: request("naive"), lambda cand=cand: request(cand), rounds=rounds,
                        names=("naive", cand), min_sample_time=0.001, warmup=1)
            med_a = sorted(c.baseline_ns)[len(c.baseline_ns) // 2]
            med_b = sorted(c.candidate_ns)[len(c.candidate_ns) // 2]
            print(f"   naive ({counts['naive'][0]} SQL + {counts['naive'][1]} catalog calls) "
                  f"{format_duration(med_a)} vs {cand} ({counts[cand][0]} SQL + {counts[cand][1]} catalog) "
                  f"{format_duration(med_b)}: {cand}/naive = {c.ratio:.3f} ({c.ci_label} {c.ci[0]:.3f}–{c.ci[1]:.3f}) "
                  f"→ {c.speedup:.1f}× faster; verdict: {c.verdict}")
        client.conn.close()


# --- 3. Django: labkit against django-zeal on zeal's own benchmark workload ------------------------------------
def _django_setup() -> Any:
    """Django on an in-memory SQLite database with zeal's benchmark models and data (zeal's tests/
    test_performance.py: 10 users who all follow each other, a profile each, 10 posts each); returns the
    workload, zeal's 433-query loop over forward/reverse many-to-one, one-to-one and many-to-many relations."""
    import django
    from django.apps import AppConfig
    from django.conf import settings

    class BenchConfig(AppConfig):
        name = __name__
        label = "bench"

    globals()["BenchConfig"] = BenchConfig
    settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
                       INSTALLED_APPS=["django.contrib.contenttypes", f"{__name__}.BenchConfig"],
                       DEFAULT_AUTO_FIELD="django.db.models.AutoField", USE_TZ=True)
    django.setup()
    from django.db import connection, models

    class User(models.Model):
        username = models.TextField()
        following = models.ManyToManyField("self", symmetrical=False, related_name="followers")
        blocked = models.ManyToManyField("self", symmetrical=False, related_name="+")

        class Meta:
            app_label = "bench"

    class Profile(models.Model):
        user = models.OneToOneField(User, on_delete=models.CASCADE)
        display_name = models.TextField()

        class Meta:
            app_label = "bench"

    class Post(models.Model):
        author = models.ForeignKey(User, on_delete=models.CASCADE, related_name="posts")
        text = models.TextField()

        class Meta:
            app_label = "bench"

    with connection.schema_editor() as editor:
        for model in (User, Profile, Post):
            editor.create_model(model)
    users = [User.objects.create(username=f"user{i}") for i in range(10)]
    User.following.through.objects.bulk_create(
        [User.following.through(from_user_id=u.id, to_user_id=f.id) for u in users for f in users if u != f])
    for i, user in enumerate(users):
        Profile.objects.create(user=user, display_name=f"User {i}")
        Post.objects.bulk_create([Post(author=user, text=f"post {j}") for j in range(10)])

    def workload() -> None:  # zeal's, line for line
        for post in Post.objects.all():
            _ = post.author.username
            _ = list(post.author.posts.all())
        for profile in Profile.objects.all():
            _ = profile.user.username
            _ = profile.user.profile.display_name
        for user in User.objects.all():
            _ = list(user.following.all())
            _ = list(user.followers.all())
            _ = list(user.blocked.all())
            for follower in user.followers.all():
                _ = follower.profile.display_name
                _ = list(follower.posts.all())

    return connection, workload


class ZealSwitch:
    """django-zeal's patches, switched on and off between runs in one process.

    ``zeal.patch.patch()`` (what zeal's ``AppConfig.ready()`` runs) replaces methods of Django's relation
    descriptors, ``QuerySet`` and ``Model``, and the module functions that build related managers. Those
    managers are made once per relation and cached on its descriptor (``related_manager_cls``): one built
    before the patch stays unpatched, so zeal's reverse-foreign-key and many-to-many checks would never run on
    relations used before it. Here every attribute the patch changes on Django's modules and their classes
    (read right after it), and the managers cached on the models' relation descriptors (dropped, then rebuilt
    by zeal's factories in one run of the workload), are kept in both states; ``on()``/``off()`` set one state
    or the other, a few dozen ``setattr`` calls."""

    def __init__(self, workload: Any) -> None:
        import django.contrib.contenttypes.fields  # noqa: F401 - zeal patches it: imported before the snapshot
        from django.apps import apps
        from zeal.patch import patch

        relations = [value for model in apps.get_models() for value in vars(model).values()
                     if hasattr(type(value), "related_manager_cls")]
        # every Django module and the classes it defines: whatever zeal's version patches is among them
        modules = [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "django" and m is not None]
        classes = [value for module in modules for value in vars(module).values()
                   if isinstance(value, type) and value.__module__ == module.__name__]
        owners = [*modules, *classes]
        before = [dict(vars(owner)) for owner in [*owners, *relations]]
        patch()
        patched = [dict(vars(owner)) for owner in owners]
        for relation in relations:
            vars(relation).pop("related_manager_cls", None)  # rebuilt through zeal's patched factories
        workload()
        after = patched + [dict(vars(relation)) for relation in relations]
        missing = object()
        self._changes = [(owner, key, old.get(key, missing), new.get(key, missing), missing)
                         for owner, old, new in zip([*owners, *relations], before, after, strict=True)
                         for key in old.keys() | new.keys() if old.get(key, missing) is not new.get(key, missing)]
        self.off()

    def caught(self, loop: Any) -> bool:
        """Whether zeal reports an N+1 in *loop* in the current state (its ``NPlusOneError``, ZEAL_RAISE's
        default)."""
        import zeal

        try:
            with zeal.zeal_context():
                loop()
        except zeal.NPlusOneError:
            return True
        return False

    def _set(self, on: bool) -> None:
        for owner, key, old, new, missing in self._changes:
            value = new if on else old
            if value is missing:
                delattr(owner, key)
            else:
                setattr(owner, key, value)

    def on(self) -> None:
        self._set(True)

    def off(self) -> None:
        self._set(False)

    def patched(self, fn: Any) -> Any:
        """*fn* as a function that runs it with zeal's patches on, and off again after."""
        def run() -> Any:
            self.on()
            try:
                return fn()
            finally:
                self.off()
        return run

    def __len__(self) -> int:
        return len(self._changes)


def django_overhead(rounds: int) -> None:
    """Watched ÷ unwatched on zeal's workload, interleaved in one process: labkit on Django as it ships; zeal
    with its patches (``ZealSwitch``) and its context — its whole cost, what a project with zeal in its
    ``INSTALLED_APPS`` pays; then, for the record, zeal's context alone and labkit, each against Django with
    zeal's patches in place but no zeal context."""
    import django

    connection, workload = _django_setup()
    workload()  # opens the connection, warms Django's caches
    raw = connection.connection

    # a new watch per run, as `with watch(connection) as w:` is used (and as zeal_context() is): one Watch
    # reused would keep its last 100 reports, and their statements, alive through the runs
    def bare() -> None:
        workload()

    def labkit_watched() -> None:
        with watch(connection):
            workload()

    def labkit_read() -> None:
        with watch(connection) as w:
            workload()
        w.report.suspects  # noqa: B018 - reading the report (built on first read) is what is added

    def raw_watched() -> None:
        with watch(raw):
            workload()

    with watch(connection) as w:
        workload()
    rep = w.report
    print(f"3. Django {django.get_version()} + SQLite, zeal's benchmark workload ({rep.count} queries, "
          f"{len(rep.suspects)} N+1 shapes found by labkit)")

    def show(label: str, a: Any, b: Any) -> Any:
        c = compare(a, b, rounds=rounds, max_rounds=rounds, max_time=120.0, min_sample_time=0.02, names=label.split(" vs "))
        print(f"   {label:<48} {c.ratio:.3f} ({c.ci_label} {c.ci[0]:.3f}–{c.ci[1]:.3f}, {len(c.baseline_ns)} rounds, "
              f"first's median {format_duration(sorted(c.baseline_ns)[len(c.baseline_ns) // 2])}), verdict: {c.verdict}")
        return c

    print("   Django as it ships (no zeal patches):")
    r_lab = show("bare vs labkit watch(connection)", bare, labkit_watched).ratio
    show("bare vs labkit watch + report read", bare, labkit_read)
    show("bare vs labkit watch(raw sqlite3 connection)", bare, raw_watched)

    from importlib.metadata import version

    import zeal

    switch = ZealSwitch(workload)
    from django.apps import apps

    user = apps.get_model("bench", "User")
    for name, loop in (("many-to-many", lambda: [list(u.following.all()) for u in user.objects.all()]),
                       ("reverse foreign key", lambda: [list(u.posts.all()) for u in user.objects.all()])):
        on = switch.patched(lambda loop=loop: switch.caught(loop))()
        if not on or switch.caught(loop):  # zeal's check must run with its patches on, and only then
            raise SystemExit(f"ZealSwitch: zeal's {name} check did not follow its patches (on: {on}); "
                             "the comparison would not measure zeal")

    def zeal_watched() -> None:  # zeal's benchmark: zeal_context() + zeal_ignore()
        with zeal.zeal_context(), zeal.zeal_ignore():
            workload()

    zeal_whole = switch.patched(zeal_watched)  # zeal as its users have it: patched at start-up, then its context
    patched = switch.patched

    def switched_bare() -> None:  # the control: what switching costs a run (type caches refilled), zeal aside
        switch.on()
        switch.off()
        workload()

    print(f"   django-zeal {version('django-zeal')} (its benchmark's zeal_context + zeal_ignore), its {len(switch)} "
          "patched attributes switched on for its runs only:")
    show("bare vs bare after a switch on and off", bare, switched_bare)
    r_zeal = show("bare vs zeal (patches + context)", bare, zeal_whole).ratio
    direct = show("zeal (patches + context) vs labkit watch", zeal_whole, labkit_watched)
    print("   both inside Django with zeal's patches in place (zeal's context alone):")
    r_ctx = show("zeal-patched bare vs zeal context", patched(bare), patched(zeal_watched)).ratio
    r_lab_p = show("zeal-patched bare vs labkit watch", patched(bare), patched(labkit_watched)).ratio
    inside = show("zeal context vs labkit watch, zeal-patched", patched(zeal_watched), patched(labkit_watched))
    # the goal is read from the direct, interleaved comparisons: ratios against bare come from separate runs
    # and can disagree with them on a noisy machine
    for what, c in (("zeal as its users have it", direct), ("zeal's context alone, both zeal-patched", inside)):
        lo, hi = c.ci
        goal = ("met: labkit is cheaper" if hi < 1.0 else "not met: labkit costs more" if lo > 1.0
                else "level: the interval holds 1 (neither shown cheaper)")
        print(f"   → labkit ÷ zeal, side by side, {what}: {c.ratio:.3f} ({lo:.3f}–{hi:.3f}); goal labkit ≤ zeal: {goal}")
    print(f"     (against bare, separately: labkit {r_lab:.3f}×, zeal {r_zeal:.3f}×; inside zeal-patched Django: "
          f"zeal's context {r_ctx:.3f}×, labkit {r_lab_p:.3f}×)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="interleaved A/B rounds per comparison")
    ap.add_argument("--size", default="small", help="dataset size for the service")
    ap.add_argument("--quick", action="store_true", help="6 rounds: a smoke run, not a measurement")
    ap.add_argument("--django-only", action="store_true", help="only part 3, labkit against django-zeal")
    args = ap.parse_args(argv)
    rounds = 6 if args.quick else args.rounds
    from labkit.service import start

    t0 = time.monotonic()
    if not args.django_only:
        with start(size=args.size) as svc:
            overhead(svc, rounds)
        for delay in (0.0, 0.5, 1.0):  # 1 ms as a control: the emulation must visibly add to each call
            end_to_end(delay, rounds, args.size)
    django_overhead(rounds)  # last: it configures Django for the rest of the process
    print(f"(took {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
