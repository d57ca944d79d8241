"""Which BOINC_FETCH_OUTPUT pairs are HTCondor's own stdout/stderr pairs."""

from gahp_boinc._outputs import stdio_pairs  # private: unit test of output fetching


def test_out_and_err_pairs_appended_by_htcondor9():
    specs = (("out", "out"), ("job.out", "job.out"), ("job.err", "job.err"))
    assert stdio_pairs(specs, "job.err") == 2


def test_out_equal_to_err_appends_one_pair():
    assert stdio_pairs((("out", "x"), ("o.txt", "o.txt")), "o.txt") == 1


def test_absolute_out_and_err():
    specs = (("out", "out"), ("j.out", "/home/a/j.out"), ("j.err", "/home/a/j.err"))
    assert stdio_pairs(specs, "/home/a/j.err") == 2


def test_no_output_set_means_no_appended_pairs():
    assert stdio_pairs((("out", "out"), ("log", "log.txt")), "/dev/null") == 0
    assert stdio_pairs((), "job.err") == 0


def test_a_remap_before_the_err_pair_is_not_stdout():
    # (out -> results/x) does not have src == basename(dst): only the Err pair is HTCondor's
    assert stdio_pairs((("out", "results/x"), ("e", "e")), "e") == 1
