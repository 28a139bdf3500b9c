"""The N+1 detector against its peers' kinds of scenario, at their data sizes: django-zeal's (run here, side by
side) for Django, nplusone's for SQLAlchemy and Peewee.

Every scenario is a few lines of ORM code with the verdict a peer gives it. An N+1 must be found with the
scenario's own line as its site (the line ending with ``# n+1``); a clean scenario must have no suspect at
the default threshold. Data as small as the peers' own tests: 4 users (2 where a scenario names two), one
post and one profile each, loops of 2–4 items, chunks of 1 and 2.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import django
import pytest
from django.apps import AppConfig
from django.conf import settings


class PeersConfig(AppConfig):
    """This module is the app holding the scenarios' models (so reverse relations resolve)."""

    name = __name__
    label = "peers"


if not settings.configured:  # one in-memory database for the module; zeal's app patches Django's descriptors
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        INSTALLED_APPS=["django.contrib.contenttypes", "zeal", f"{__name__}.PeersConfig"], ZEAL_RAISE=False,
        DEFAULT_AUTO_FIELD="django.db.models.AutoField", USE_TZ=True,
    )
    django.setup()

from django.db import connection, models  # noqa: E402
from django.db.models import prefetch_related_objects  # noqa: E402
from zeal import zeal_context  # noqa: E402

from labkit.nplusone import Report, watch  # noqa: E402

HERE = Path(__file__).resolve()


class User(models.Model):
    username = models.TextField()
    following = models.ManyToManyField("self", symmetrical=False, related_name="followers")

    class Meta:
        app_label = "peers"


class Profile(models.Model):
    user = models.OneToOneField(User, on_delete=models.CASCADE)
    display_name = models.TextField()

    class Meta:
        app_label = "peers"


class Post(models.Model):
    author = models.ForeignKey(User, on_delete=models.CASCADE, related_name="posts")
    text = models.TextField()

    class Meta:
        app_label = "peers"


class Node(models.Model):
    """django-zeal's model with a custom equality that reads a relation (its tests/test_util.py): comparing two
    nodes compares their parents, so one comparison walks up the tree."""

    name = models.TextField()
    parent = models.ForeignKey("self", null=True, on_delete=models.CASCADE, related_name="children")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        mine = self.parent
        theirs = other.parent
        return mine == theirs and self.name == other.name

    __hash__ = models.Model.__hash__

    class Meta:
        app_label = "peers"


@pytest.fixture(scope="module", autouse=True)
def shop() -> None:
    with connection.schema_editor() as editor:
        for model in (User, Profile, Post, Node):
            editor.create_model(model)
    root = Node.objects.create(name="root")
    middle = Node.objects.create(name="middle", parent=root)
    for _ in range(2):
        Node.objects.create(name="leaf", parent=middle)
    users = [User.objects.create(username=f"u{i}") for i in range(4)]
    for i, user in enumerate(users):
        Post.objects.create(author=user, text=f"post {i}")
        Profile.objects.create(user=user, display_name=f"User {i}")
        user.following.add(users[(i + 1) % 4])


def marked_line(fn: Callable[[], None]) -> str | None:
    """``file:line`` of the line of *fn* ending with ``# n+1`` (None when it has none)."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, text in enumerate(lines) if text.rstrip().endswith("# n+1")]
    assert len(hits) <= 1, fn.__name__
    return f"{HERE}:{hits[0]}" if hits else None


DJANGO: dict[str, tuple[Callable[[], None], bool]] = {}


def django_case(zeal: bool) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register a Django scenario with django-zeal's verdict (True: zeal reports an N+1)."""
    def register(fn: Callable[[], None]) -> Callable[[], None]:
        DJANGO[fn.__name__] = (fn, zeal)
        return fn
    return register


# --- forward many-to-one, one-to-one ---------------------------------------------------------------------------
@django_case(zeal=True)
def fk_in_a_loop() -> None:
    for post in Post.objects.all():
        _ = post.author.username  # n+1


@django_case(zeal=False)
def fk_select_related() -> None:
    for post in Post.objects.select_related("author"):
        _ = post.author.username


@django_case(zeal=True)
def fk_in_a_chunked_iterator() -> None:
    for post in Post.objects.all().iterator(chunk_size=2):
        _ = post.author.username  # n+1


@django_case(zeal=False)
def fk_select_related_chunked_iterator() -> None:
    for post in Post.objects.select_related("author").iterator(chunk_size=2):
        _ = post.author.username


@django_case(zeal=False)
def fk_prefetched_instead_of_joined() -> None:
    for post in Post.objects.prefetch_related("author"):
        _ = post.author.username


@django_case(zeal=True)
def one_to_one_in_a_loop() -> None:
    for profile in Profile.objects.all():
        _ = profile.user.username  # n+1


@django_case(zeal=False)
def single_objects_by_first_slice_and_get() -> None:
    post_1 = Post.objects.filter(pk=1).first()
    post_2 = Post.objects.filter(pk=2).first()
    _ = post_1.author  # type: ignore[union-attr]
    _ = post_2.author  # type: ignore[union-attr]
    post_1 = Post.objects.filter(pk=1)[0]
    post_2 = Post.objects.filter(pk=2)[0]
    _ = post_1.author
    _ = post_2.author
    post_1 = Post.objects.get(pk=1)
    post_2 = Post.objects.get(pk=2)
    _ = post_1.author
    _ = post_2.author


# --- reverse relations -----------------------------------------------------------------------------------------
@django_case(zeal=True)
def reverse_fk_in_a_loop() -> None:
    for user in User.objects.all():
        _ = list(user.posts.all())  # n+1


@django_case(zeal=False)
def reverse_fk_prefetched() -> None:
    for user in User.objects.prefetch_related("posts"):
        _ = list(user.posts.all())


@django_case(zeal=True)
def reverse_fk_in_a_chunked_iterator() -> None:
    for user in User.objects.all().iterator(chunk_size=2):
        _ = list(user.posts.all())  # n+1


@django_case(zeal=False)
def reverse_fk_prefetched_in_chunks_of_two() -> None:
    for user in User.objects.prefetch_related("posts").iterator(chunk_size=2):  # one prefetch per chunk
        _ = list(user.posts.all())


@django_case(zeal=False)
def reverse_fk_prefetched_in_chunks_of_one() -> None:
    for user in User.objects.prefetch_related("posts").iterator(chunk_size=1):  # one prefetch per user
        _ = list(user.posts.all())


@django_case(zeal=False)
def reverse_fk_on_two_lines() -> None:
    user_1, user_2 = User.objects.filter(pk__in=(1, 2)).order_by("pk")
    _ = list(user_1.posts.all())
    _ = list(user_2.posts.all())


@django_case(zeal=False)
def reverse_fk_evaluated_twice() -> None:
    user = User.objects.get(pk=1)
    posts = user.posts.all()
    list(posts)
    list(posts)  # the result cache: no second query


@django_case(zeal=True)
def reverse_one_to_one_in_a_loop() -> None:
    for user in User.objects.all():
        _ = user.profile.display_name  # n+1


@django_case(zeal=False)
def reverse_one_to_one_select_related() -> None:
    for user in User.objects.select_related("profile"):
        _ = user.profile.display_name


# --- many-to-many ----------------------------------------------------------------------------------------------
@django_case(zeal=True)
def many_to_many_in_a_loop() -> None:
    for user in User.objects.all():
        _ = list(user.following.all())  # n+1


@django_case(zeal=True)
def reverse_many_to_many_in_a_loop() -> None:
    for user in User.objects.all():
        _ = list(user.followers.all())  # n+1


@django_case(zeal=False)
def many_to_many_prefetched() -> None:
    for user in User.objects.prefetch_related("following", "followers"):
        _ = list(user.following.all()), list(user.followers.all())


@django_case(zeal=False)
def many_to_many_prefetched_in_chunks() -> None:
    for user in User.objects.prefetch_related("followers").iterator(chunk_size=2):
        _ = list(user.followers.all())


@django_case(zeal=False)
def many_to_many_first_on_two_lines() -> None:
    user_1, user_2 = User.objects.filter(pk__in=(1, 2)).order_by("pk")
    _ = user_1.following.first()
    _ = user_2.following.first()


# --- .get() and .first() ---------------------------------------------------------------------------------------
@django_case(zeal=True)
def get_in_a_loop() -> None:
    for pk in (1, 2, 3):
        _ = User.objects.get(pk=pk)  # n+1


@django_case(zeal=False)
def get_on_two_lines() -> None:
    _ = User.objects.get(pk=1)
    _ = User.objects.get(pk=2)


@django_case(zeal=False)  # zeal instruments relations and .get(), not .first(): it misses this one
def first_in_a_loop() -> None:
    for user in User.objects.all():
        _ = Post.objects.filter(author=user).first()  # n+1


@django_case(zeal=True)
def deferred_field_in_a_loop() -> None:
    for post in Post.objects.only("id"):
        _ = post.text  # n+1


# --- prefetch_related_objects ----------------------------------------------------------------------------------
@django_case(zeal=True)
def prefetch_related_objects_per_instance() -> None:
    users = list(User.objects.all())
    for user in users:
        prefetch_related_objects([user], "posts")  # n+1


@django_case(zeal=False)
def prefetch_related_objects_in_bulk() -> None:
    users = list(User.objects.all())
    prefetch_related_objects(users, "posts")


def _prefetch_one(user: User) -> None:
    prefetch_related_objects([user], "posts")


@django_case(zeal=False)
def prefetch_helper_called_from_two_lines() -> None:
    _prefetch_one(User.objects.get(pk=1))
    _prefetch_one(User.objects.get(pk=2))


# --- a custom __eq__ that walks relations (django-zeal's nested-relation test) -------------------------------
@django_case(zeal=False)
def nested_relation_through_custom_equality() -> None:
    leaf_1 = Node.objects.filter(name="leaf").order_by("pk").first()
    leaf_2 = Node.objects.filter(name="leaf").order_by("-pk").first()
    assert leaf_1 == leaf_2 and leaf_1.parent == leaf_2.parent   # each parent, then each grandparent, once
    leaf = Node.objects.filter(name="leaf").first()
    _ = leaf.parent.parent                                        # one relation, then the next: a chain, not a loop


# the one scenario where labkit and zeal are expected to differ (labkit counts the query, zeal the relation)
LABKIT_ONLY = {"first_in_a_loop"}


def labkit_verdict(fn: Callable[[], None]) -> Report:
    with watch(connection) as w:
        fn()
    assert w.report is not None
    return w.report


def zeal_verdict(fn: Callable[[], None]) -> list[str]:
    """``file:line`` of every N+1 zeal reports for *fn* (a warning each: ZEAL_RAISE is False)."""
    with warnings.catch_warnings(record=True) as seen, zeal_context():
        warnings.simplefilter("always")
        fn()
    return [f"{w.filename}:{w.lineno}" for w in seen if "N+1 detected" in str(w.message)]


@pytest.mark.parametrize("name", list(DJANGO))
def test_django_scenario_agrees_with_zeal(name: str) -> None:
    # GIVEN a scenario and zeal's verdict on it, checked by running zeal on it here
    fn, zeal_says = DJANGO[name]
    zeal_sites = zeal_verdict(fn)
    assert bool(zeal_sites) is zeal_says, f"zeal's verdict on {name} changed: {zeal_sites}"
    # WHEN labkit watches the same code through Django's connection
    report = labkit_verdict(fn)
    # THEN it finds an N+1 exactly where zeal does, at the scenario's own line (and only there)
    expected = marked_line(fn)
    found = sorted({site for s in report.suspects for site, _n in s.sites[:1]})
    assert found == ([expected] if expected else []), str(report)
    if name not in LABKIT_ONLY:
        assert set(zeal_sites) == set(found)
    assert all(q.target == "django:sqlite" and q.timing == "hook" for q in report.queries)


def test_django_agreement_count() -> None:
    # the figure quoted for issue 27: every Django scenario but the .first() loop zeal does not instrument
    agreed = [n for n, (fn, zeal) in DJANGO.items() if (marked_line(fn) is not None) is zeal]
    assert sorted(set(DJANGO) - set(agreed)) == sorted(LABKIT_ONLY)
    assert len(DJANGO) >= 25


def test_django_report_totals_a_shape_over_its_lines() -> None:
    # GIVEN the same per-user query sent from two lines, each in its own loop of 4
    def two_loops() -> None:
        for user in User.objects.all():
            _ = list(user.posts.all())  # loop-a
        for user in User.objects.all():
            _ = list(user.posts.all())  # loop-b

    report = labkit_verdict(two_loops)
    # THEN one shape, 8 queries in total, 4 repeats from each of its two lines, both suspect
    (posts,) = [s for s in report.shapes if "peers_post" in s.shape]
    assert posts.count == 8 and posts.repeats == 4 and posts.suspect
    assert sorted(n for _site, n in posts.sites) == [4, 4]
    frame = report.to_frame()
    assert int(frame["suspect"].sum()) == 8


def test_threshold_raises_the_bar_per_line() -> None:
    report = labkit_verdict(DJANGO["get_in_a_loop"][0])  # 3 gets from one line
    assert report.suspects
    with watch(connection, threshold=3) as w:
        DJANGO["get_in_a_loop"][0]()
    assert w.report is not None and w.report.clean  # 3 is not more than 3


# --- SQLAlchemy (nplusone's kinds of scenario: lazy loads, and the loader options that remove them) -------------
from sqlalchemy import ForeignKey, create_engine, select  # noqa: E402
from sqlalchemy.orm import (  # noqa: E402
    DeclarativeBase,
    Mapped,
    Session,
    joinedload,
    mapped_column,
    relationship,
    selectinload,
)


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    books: Mapped[list[Book]] = relationship(back_populates="author")
    tags: Mapped[list[Tag]] = relationship(secondary="author_tags")


class Book(Base):
    __tablename__ = "books"
    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"))
    author: Mapped[Author] = relationship(back_populates="books")


class Tag(Base):
    __tablename__ = "tags"
    id: Mapped[int] = mapped_column(primary_key=True)


class AuthorTag(Base):
    __tablename__ = "author_tags"
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"), primary_key=True)
    tag_id: Mapped[int] = mapped_column(ForeignKey("tags.id"), primary_key=True)


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    eng = create_engine("sqlite://")
    Base.metadata.create_all(eng)
    with Session(eng) as s:
        tags = [Tag(id=i) for i in range(1, 3)]
        s.add_all([Author(id=i, name=f"a{i}", books=[Book(id=i)], tags=tags) for i in range(1, 5)])
        s.commit()
    return eng


SQLALCHEMY: dict[str, tuple[Callable[[Session], None], bool]] = {}


def sa_case(nplusone: bool) -> Callable[[Callable[[Session], None]], Callable[[Session], None]]:
    """Register a SQLAlchemy scenario with the verdict nplusone gives it (True: an N+1)."""
    def register(fn: Callable[[Session], None]) -> Callable[[Session], None]:
        SQLALCHEMY[fn.__name__] = (fn, nplusone)
        return fn
    return register


@sa_case(nplusone=True)
def sa_lazy_one_to_many(s: Session) -> None:
    for author in s.scalars(select(Author)):
        _ = list(author.books)  # n+1


@sa_case(nplusone=True)
def sa_lazy_many_to_one(s: Session) -> None:
    for book in s.scalars(select(Book)).all():
        _ = book.author.name  # n+1


@sa_case(nplusone=True)
def sa_lazy_many_to_many(s: Session) -> None:
    for author in s.scalars(select(Author)).all():
        _ = list(author.tags)  # n+1


@sa_case(nplusone=False)
def sa_joinedload(s: Session) -> None:
    for book in s.scalars(select(Book).options(joinedload(Book.author))):
        _ = book.author.name


@sa_case(nplusone=False)
def sa_selectinload(s: Session) -> None:
    for author in s.scalars(select(Author).options(selectinload(Author.books), selectinload(Author.tags))):
        _ = list(author.books), list(author.tags)


@sa_case(nplusone=False)
def sa_selectinload_in_chunks(s: Session) -> None:
    stmt = select(Author).options(selectinload(Author.books)).execution_options(yield_per=2)
    for author in s.scalars(stmt):  # one selectin load per chunk of 2
        _ = list(author.books)


@sa_case(nplusone=False)
def sa_single_objects_on_two_lines(s: Session) -> None:
    a1 = s.get(Author, 1)
    a2 = s.get(Author, 2)
    _ = list(a1.books)  # type: ignore[union-attr]
    _ = list(a2.books)  # type: ignore[union-attr]


@sa_case(nplusone=True)
def sa_get_in_a_loop(s: Session) -> None:
    for pk in (1, 2, 3):
        _ = s.scalars(select(Author).where(Author.id == pk)).first()  # n+1


@pytest.mark.parametrize("name", list(SQLALCHEMY))
def test_sqlalchemy_scenario(engine, name: str) -> None:  # type: ignore[no-untyped-def]
    fn, nplusone_says = SQLALCHEMY[name]
    with Session(engine) as s, watch(engine) as w:
        fn(s)
    assert w.report is not None
    found = sorted({st.site for st in w.report.suspects})
    expected = marked_line(fn)
    assert (expected is not None) is nplusone_says
    assert found == ([expected] if expected else []), str(w.report)


# --- Peewee (through its sqlite3 connection) ---------------------------------------------------------------------
import peewee  # noqa: E402

pdb = peewee.SqliteDatabase(":memory:")


class PAuthor(peewee.Model):
    name = peewee.TextField()

    class Meta:
        database = pdb


class PBook(peewee.Model):
    author = peewee.ForeignKeyField(PAuthor, backref="books")

    class Meta:
        database = pdb


@pytest.fixture(scope="module")
def peewee_db() -> peewee.SqliteDatabase:
    pdb.connect(reuse_if_open=True)
    pdb.create_tables([PAuthor, PBook])
    for i in range(1, 5):
        PBook.create(author=PAuthor.create(name=f"a{i}"))
    return pdb


PEEWEE: dict[str, tuple[Callable[[], None], bool]] = {}


def pw_case(nplusone: bool) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Register a Peewee scenario with the verdict nplusone gives it (True: an N+1)."""
    def register(fn: Callable[[], None]) -> Callable[[], None]:
        PEEWEE[fn.__name__] = (fn, nplusone)
        return fn
    return register


@pw_case(nplusone=True)
def pw_lazy_foreign_key() -> None:
    for book in PBook.select():
        _ = book.author.name  # n+1


@pw_case(nplusone=True)
def pw_lazy_backref() -> None:
    for author in PAuthor.select():
        _ = list(author.books)  # n+1


@pw_case(nplusone=False)
def pw_join() -> None:
    for book in PBook.select(PBook, PAuthor).join(PAuthor):
        _ = book.author.name


@pw_case(nplusone=False)
def pw_prefetch() -> None:
    for author in peewee.prefetch(PAuthor.select(), PBook.select()):
        _ = list(author.books)


@pw_case(nplusone=True)
def pw_get_in_a_loop() -> None:
    for pk in (1, 2, 3):
        _ = PAuthor.get_by_id(pk)  # n+1


@pw_case(nplusone=False)
def pw_get_on_two_lines() -> None:
    _ = PAuthor.get_by_id(1)
    _ = PAuthor.get_by_id(2)


@pytest.mark.parametrize("name", list(PEEWEE))
def test_peewee_scenario(peewee_db: peewee.SqliteDatabase, name: str) -> None:
    fn, nplusone_says = PEEWEE[name]
    with watch(peewee_db.connection()) as w:
        fn()
    assert w.report is not None
    found = sorted({st.site for st in w.report.suspects})
    expected = marked_line(fn)
    assert (expected is not None) is nplusone_says
    assert found == ([expected] if expected else []), str(w.report)
