"""Every producer x consumer pair of the current frameworks (CPU), under the
shim: one export, one import and one release per exchange, each named after
its framework, versioned and zero-copy as the frameworks themselves say, and
no violation.  The oracle is the frameworks' own behaviour, read by
progs/matrix.py without DLPack where it can be: the version each consumer
asks for, which producers answer with a versioned capsule, whether the
consumer's tensor shares the producer's bytes.

Writes build/frameworks/matrix.json, from which scripts/frameworks-md makes
docs/frameworks.md (make check compares the two)."""
import json

import pytest

from conftest import BUILD, between

# MLX converts its own arrays without DLPack: that pair makes no handoff.
NOT_THROUGH_DLPACK = {("mlx", "mlx")}


def result_of(r):
    [line] = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    from conftest import Runner
    r = Runner(tmp_path_factory.mktemp("matrix")).framework("matrix.py", timeout=900)
    assert r.rc == 0, r.stderr[-3000:]
    return r, result_of(r)


def expected_route(facts, p, c):
    """How the pair hands over: tvm-ffi takes a producer's tensor through the
    C exchange table where the producer's type publishes one."""
    return "exchange_api" if c == "tvm_ffi" and facts["exchange_api"][p] else "capsule"


def expected_versioned(facts, p, c):
    if expected_route(facts, p, c) == "exchange_api":
        return True  # the table hands over DLManagedTensorVersioned only
    return facts["asks_versioned"][c] and facts["answers_versioned"][p]


def check_pair(events, facts, pair):
    p, c = pair["producer"], pair["consumer"]
    taking = between(events, f"pair {p} {c}", f"taken {p} {c}")
    exports = [e for e in taking if e["event"] == "export"]
    imports = [e for e in taking if e["event"] == "import"]
    if (p, c) in NOT_THROUGH_DLPACK:
        assert exports == imports == [], (p, c, taking)
        return None
    [exp], [imp] = exports, imports
    assert exp["producer"] == p and imp["consumer"] == c and imp["producer"] == p, (p, c, taking)
    assert imp["tensor"] == exp["tensor"]
    route = expected_route(facts, p, c)
    assert exp["api"] == imp["api"] == route, (p, c, exp, imp)
    assert exp["versioned"] == expected_versioned(facts, p, c), (p, c, exp)
    assert exp["device"] == "cpu:0" and exp["dtype"] == "float32" and exp["shape"] == [6]
    dropping = between(events, f"measured {p} {c}", f"dropped {p} {c}")
    if pair["zero_copy"]:
        # The consumer holds the producer's bytes until its tensor dies.
        assert imp["zero_copy"] is True
        assert not [e for e in taking if e["event"] == "release"], (p, c, taking)
        [rel] = [e for e in dropping if e["event"] == "release"]
        assert "copy_on_import" not in rel
    else:
        # The consumer copied and let the producer's tensor go at once.
        [rel] = [e for e in taking if e["event"] == "release"]
        assert rel["copy_on_import"] is True and rel["bytes_copied"] == 24, (p, c, rel)
        assert not [e for e in dropping if e["event"] == "release"]
    assert rel["tensor"] == exp["tensor"] and rel["consumed"] is True and rel["consumer"] == c
    return {"versioned": exp["versioned"], "api": route, "zero_copy": pair["zero_copy"]}


def test_every_pair(traced):
    r, result = traced
    facts = result["facts"]
    assert r.violations() == []
    rows = []
    for pair in result["pairs"]:
        p, c = pair["producer"], pair["consumer"]
        row = dict(pair)
        if pair["status"] == "refused":
            window = between(r.events, f"pair {p} {c}", f"refused {p} {c}")
            assert not [e for e in window if e["event"] == "import"], (p, c, window)
        else:
            seen = check_pair(r.events, facts, pair)
            row["dlpack"] = seen is not None
            row.update(seen or {})
        rows.append(row)
    s = r.summary
    assert s["outstanding"] == 0 and s["violations"] == {} and s["dropped_events"] == 0
    out = BUILD / "frameworks"
    out.mkdir(parents=True, exist_ok=True)
    (out / "matrix.json").write_text(json.dumps({"facts": facts, "pairs": rows}, indent=1) + "\n")


def test_copies_are_counted_per_pair(traced):
    r, result = traced
    pairs = {(p["producer"], p["consumer"]): p for p in r.summary["pairs"]}
    for pair in result["pairs"]:
        key = (pair["producer"], pair["consumer"])
        if pair["status"] == "ok" and key not in NOT_THROUGH_DLPACK and not pair["zero_copy"]:
            assert pairs[key]["copies"] >= 1 and pairs[key]["bytes_copied"] >= 24, key


def test_same_results_without_the_shim(dlshim, traced):
    _, traced_result = traced
    bare = dlshim.framework("matrix.py", shim=False, timeout=900)
    assert bare.rc == 0, bare.stderr[-3000:]
    bare_result = result_of(bare)
    assert bare_result == traced_result
