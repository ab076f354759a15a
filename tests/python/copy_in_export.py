"""A CPU tensor filled from device memory, two ways (tests/python/devproducer.c):
copied inside the call that makes the capsule, for the consumer (as
__dlpack__(dl_device=cpu) does), and copied by the program first, then
exported as it is (x.copy_(src), then from_dlpack(x))."""
from common import mark  # first: it puts the built extensions on sys.path

import devproducer  # noqa: E402

mark("start")
inside = devproducer.host_copy()
mark("copied inside")
devproducer.copy_to_host()
before = devproducer.host_capsule()
mark("copied before")
del inside, before
