"""DLPack 1.x: versioned capsules with flags, consumers in every style, and
the 1.3 exchange table.  Each object is dropped between two marks."""
from common import mark  # first: it puts the built extensions on sys.path

import dlpack1ext as ext  # noqa: E402

READ_ONLY, IS_COPIED = 1, 2

h = ext.consume(ext.make(5, READ_ONLY | IS_COPIED))
print("copied", ext.total(h))
mark("drop copied")
del h
mark("dropped copied")

h = ext.consume_jax_style(ext.make(4))
print("jax style", ext.total(h))
mark("drop jax style")
del h
mark("dropped jax style")

h = ext.consume_by_destructor(ext.make(3))
print("by destructor", ext.total(h))
mark("drop by destructor")
del h
mark("dropped by destructor")

api = ext.exchange_api()
converted, allocated = ext.exchange(api, 6)
print("exchange", ext.total(converted), ext.total(allocated))
mark("drop exchange")
del converted, allocated
mark("dropped exchange")

unconsumed = ext.make(2)
mark("drop unconsumed")
del unconsumed
mark("end")
