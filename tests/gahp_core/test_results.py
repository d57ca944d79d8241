from gahp_core.results import ResultQueue


def test_order_and_drain():
    q = ResultQueue()
    for i in range(5):
        assert q.add(str(i), ("NULL",)) is False
    assert [r for r, _ in q.drain()] == ["0", "1", "2", "3", "4"]
    assert q.drain() == []


def test_one_r_between_results():
    q = ResultQueue()
    q.add("1", ())
    q.set_async(True)
    assert q.add("2", ()) is True  # first addition after ASYNC_MODE_ON
    assert q.add("3", ()) is False
    q.drain()
    assert q.add("4", ()) is True
    q.set_async(False)
    q.drain()
    assert q.add("5", ()) is False
