"""Every producer x consumer pair of the frameworks on the CPU, each between
marks, with what the frameworks themselves say (the oracle the test compares
dlshim's events with): the DLPack version each consumer asks for, which
producers answer with a versioned capsule, whether the consumer's tensor
shares the producer's bytes, and each refusal with the framework's error.
Prints one line: RESULT <json>.  Usage: matrix.py [producer,... [consumer,...]]"""
import gc
import json
import sys
import traceback

import frameworks as fw
from frameworks import mark


class Spy:
    """A producer that records how a consumer calls __dlpack__."""

    def __init__(self):
        self.inner = fw.np.arange(4, dtype=fw.np.float32)
        self.kwargs = None

    def __dlpack__(self, **kwargs):
        self.kwargs = kwargs
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


def asks_versioned(consumer):
    """Whether `consumer` asks producers for DLPack 1.x (max_version >= 1)."""
    if consumer == "tensorflow":
        return False  # it takes a capsule made by x.__dlpack__(), which is legacy
    spy = Spy()
    try:
        result = fw.take(consumer, spy)
        del result
    except Exception:
        pass
    version = (spy.kwargs or {}).get("max_version")
    return bool(version) and version[0] >= 1


def answers_versioned(producer):
    """Whether `producer` makes a versioned capsule when asked for one."""
    x = fw.make(producer)
    try:
        capsule = x.__dlpack__(max_version=(1, 0))
    except TypeError:
        return False
    return fw.capsule_name(capsule) == "dltensor_versioned"


def error_text(e):
    text = f"{type(e).__name__}: {e}".splitlines()[0]
    return text[:200]


def main():
    producers = sys.argv[1].split(",") if len(sys.argv) > 1 else fw.NAMES
    consumers = sys.argv[2].split(",") if len(sys.argv) > 2 else fw.CONSUMERS
    mark("facts")
    facts = {
        "versions": fw.VERSIONS,
        "asks_versioned": {c: asks_versioned(c) for c in consumers},
        "answers_versioned": {p: answers_versioned(p) for p in producers},
        "exchange_api": {p: fw.exchange_api_of(fw.make(p)) for p in producers},
    }
    gc.collect()
    mark("pairs")
    pairs = []
    for p in producers:
        for c in consumers:
            x = fw.make(p)
            src = fw.data_ptr(p, x)
            pair = {"producer": p, "consumer": c}
            mark(f"pair {p} {c}")
            try:
                y = fw.take(c, x)
            except Exception as e:
                mark(f"refused {p} {c}")
                pair.update(status="refused", error=error_text(e))
                pairs.append(pair)
                del x
                gc.collect()
                continue
            mark(f"taken {p} {c}")
            try:
                dst = fw.data_ptr(c, y)
            except Exception:
                traceback.print_exc()
                dst = None
            mark(f"measured {p} {c}")
            del y
            gc.collect()
            mark(f"dropped {p} {c}")
            pair.update(status="ok", zero_copy=src == dst)
            pairs.append(pair)
            del x
            gc.collect()
    mark("end")
    print("RESULT " + json.dumps({"facts": facts, "pairs": pairs}), flush=True)


main()
