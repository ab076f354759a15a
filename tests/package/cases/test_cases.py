"""What the package test runs under the pytest plugin: one clean test, one
that releases a tensor twice, and one that leaves a share outstanding."""
import handoffs


def test_clean():
    handoffs.consume(handoffs.export())


def test_double_release():
    handoffs.consume(handoffs.export(), times=2)


def test_keeps_a_share():
    handoffs.keep.append(handoffs.export())
