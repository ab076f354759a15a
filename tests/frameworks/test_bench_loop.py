"""make bench's Python loop on the venv's PyTorch 2.13 and NumPy 2 (the
versioned path) runs under the shim, every handoff a zero-copy share."""
import json

from conftest import ROOT


def test_versioned_exchange_loop_is_zero_copy_under_the_shim(dlshim):
    r = dlshim.framework(ROOT / "bench" / "exchange.py", "10")
    assert r.rc == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["ns"] > 0
    exports = r.of("export")
    assert exports and all(e["versioned"] and e["api"] == "capsule" for e in exports)
    # 1000 warm-up + 10 timed + 1 checked round trips, two handoffs each.
    assert r.summary["shares"] == 2 * 1011 and r.summary["copies"] == 0
