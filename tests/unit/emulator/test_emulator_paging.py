"""The emulator's vGPU listing: a page costs O(page), whatever the listing's size (the scan benchmark's 100,000)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from whitesky_emulator.store import Store

from properties import examples


def store_with(tmp_path, n, other=0):
    store = Store(str(tmp_path / "state.db"))
    for i in range(n):
        store.vgpus.reserve("c1", "loc-a", "a100", "v%05d" % i)
        if i < other:
            store.vgpus.reserve("c2", "loc-a", "a100", "w%05d" % i)  # another customer's, interleaved
    return store


def test_a_page_reads_its_rowid_range_not_the_customers_index(tmp_path):
    store = store_with(tmp_path, 50, other=20)
    seen = []
    query = store.db.rows
    store.db.rows = lambda sql, *args: seen.append((sql, args)) or query(sql, *args)
    page = store.vgpus.page("c1", "loc-a", 10, 20, include_deleted=True)
    assert [r.vgpu_name for r in page] == ["v%05d" % i for i in range(20, 30)]
    sql, args = seen[-1]
    plan = " ".join(row[3] for row in store.db.conn.execute("EXPLAIN QUERY PLAN " + sql, args))
    assert "INTEGER PRIMARY KEY" in plan and "TEMP B-TREE" not in plan, plan


@settings(max_examples=examples(25), deadline=None)
@given(n=st.integers(0, 40), other=st.integers(0, 40), limit=st.integers(1, 15), deleted=st.booleans())
def test_pages_put_together_are_the_listing(tmp_path_factory, n, other, limit, deleted):
    store = store_with(tmp_path_factory.mktemp("s"), n, other=min(other, n))
    names = []
    for start in range(0, store.vgpus.count("c1", "loc-a", include_deleted=deleted), limit):
        names += [r.vgpu_name for r in store.vgpus.page("c1", "loc-a", limit, start, include_deleted=deleted)]
    assert names == ["v%05d" % i for i in range(n)]
