"""A device tensor handed between two extensions through a capsule, the
consumer on its own stream with no synchronization (tests/python/devproducer.c,
devconsumer.c)."""
from common import mark  # first: it puts the built extensions on sys.path

import devconsumer  # noqa: E402
import devproducer  # noqa: E402

capsule = devproducer.produce()
handle = devconsumer.start(capsule)
devconsumer.copied(handle, 1.0)  # the copy finishes first unless a barrier holds it
devproducer.open_gate()
print("consumer saw", devconsumer.finish(handle))
mark("end")
