"""Tests of bench/compare's parsing and verdicts: `python3 -m unittest discover -s bench`.

The tool outputs below are lines as qperf 0.4.11, sockperf 3.7, fi_pingpong (libfabric 1.17)
and ucx_perftest 1.13.1 print them on this machine: a parser that stops matching them would
silently turn an anchor into "failed", so these tests pin the formats.
"""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader("bench_compare", os.path.join(HERE, "compare"))
_spec = importlib.util.spec_from_loader("bench_compare", _loader)
compare = importlib.util.module_from_spec(_spec)
_loader.exec_module(compare)

QPERF_LAT = "tcp_lat:\n    latency  =  41.3 us\n"
QPERF_LAT_NS = "tcp_lat:\n    latency  =  950 ns\n"
QPERF_BW = "tcp_bw:\n    bw  =  5.09 GB/sec\n"
SOCKPERF = (
    "sockperf: [Valid Duration] RunTime=0.555 sec; SentMessages=22650; ReceivedMessages=22650\n"
    "sockperf: \x1b[2;35m====> avg-latency=12.240 (std-dev=28.799)\x1b[0m\n"
    "sockperf: ---> percentile 50.000 =    7.283\n"
)
FI = (
    "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
    "8       20k     =20k     312k        0.03s     12.50       0.64       1.56\n"
)
FI_1M = (
    "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
    "1m      1k      =1k      2.0g        0.11s  18531.00      56.58       0.02\n"
)
UCX = "Final:                 10000      0.135     0.142     0.258       53.71      53.71     7039785     7039785\n"
UCX_BW = "Final:                  2000      0.000    70.000    70.000    14285.00   14400.00       14286       14286\n"


class Parsers(unittest.TestCase):
    def test_qperf(self):
        self.assertAlmostEqual(compare.parse_qperf(QPERF_LAT, "tcp_lat"), 41.3)
        self.assertAlmostEqual(compare.parse_qperf(QPERF_LAT_NS, "tcp_lat"), 0.95)
        self.assertAlmostEqual(compare.parse_qperf(QPERF_BW, "tcp_bw"), 5090.0)

    def test_sockperf_takes_the_average(self):
        self.assertAlmostEqual(compare.parse_sockperf(SOCKPERF), 12.24)

    def test_fi_pingpong_latency_and_rate(self):
        self.assertAlmostEqual(compare.parse_fi(FI, "lat"), 0.64)
        self.assertAlmostEqual(compare.parse_fi(FI_1M, "bw"), 18531.0)

    def test_ucx_overall_latency_and_bandwidth_in_mb(self):
        self.assertAlmostEqual(compare.parse_ucx(UCX, "am_lat"), 0.258)
        self.assertAlmostEqual(compare.parse_ucx(UCX_BW, "put_bw"), 14400.0 * 1.048576)

    def test_ucx_message_rate_in_millions(self):
        self.assertAlmostEqual(compare.parse_ucx(UCX_BW, "am_bw", rate=True), 0.014286)

    def test_garbage_is_a_failure_not_a_number(self):
        for parse in (lambda o: compare.parse_qperf(o, "tcp_lat"), compare.parse_sockperf,
                      lambda o: compare.parse_fi(o, "lat"), lambda o: compare.parse_ucx(o, "am_lat")):
            with self.assertRaises(compare.Failed):
                parse("Segmentation fault\n")


def row(key, values, errors=()):
    r = compare.Row(key, key, "us", ("cmd", None))
    r.values, r.errors = list(values), list(errors)
    return r


class Verdicts(unittest.TestCase):
    def test_ratio_pairs_runs_of_one_rep(self):
        # Per-rep ratios 1.0, 1.2, 2.0: median 1.2, although the medians' ratio is 4/3.
        ours, base = row("a", [1.0, 6.0, 4.0]), row("b", [1.0, 5.0, 2.0])
        self.assertAlmostEqual(compare.ratio(ours, base), 1.2)

    def test_ratio_skips_failed_reps(self):
        ours, base = row("a", [1.0, None, 3.0]), row("b", [2.0, 1.0, None])
        self.assertAlmostEqual(compare.ratio(ours, base), 0.5)

    def test_met_and_not_met(self):
        by_key = {"a": row("a", [1.2, 1.3]), "b": row("b", [1.0, 1.0])}
        self.assertIn("**met**", compare.verdict(("3", "x", "a", "b", "<=", 1.25), by_key))
        self.assertIn("**not met**", compare.verdict(("3", "x", "a", "b", "<=", 1.2), by_key))
        self.assertIn("**met**", compare.verdict(("5", "x", "b", None, "<=", 1.0), by_key))
        self.assertIn("**not met**", compare.verdict(("5", "x", "b", None, "<", 1.0), by_key))

    def test_a_verdict_counts_the_reps_that_held(self):
        # Per-rep ratios 1.0, 1.3, 1.05: the median 1.05 meets 1.1, in two of the three reps.
        by_key = {"a": row("a", [1.0, 1.3, 2.1]), "b": row("b", [1.0, 1.0, 2.0])}
        self.assertIn("**met** (in 2 of 3 reps)", compare.verdict(("4", "x", "a", "b", "<=", 1.1), by_key))
        # An absolute target counts the reps that ran.
        by_key = {"c": row("c", [0.19, None, 0.25, 0.18])}
        self.assertIn("**met** (in 2 of 3 reps)", compare.verdict(("5", "x", "c", None, "<", 0.20), by_key))

    def test_pgo_pairs_compare_the_two_builds_rep_by_rep(self):
        rws = [row("p", [2.0, 2.0, 2.0, None]), row("p-pgo", [1.0, 3.0, 1.5, 1.0]), row("q-pgo", [1.0])]
        lines = compare.pgo_pairs(rws, {r.key: r for r in rws})
        # q-pgo has no default row: no line. p: ratios 0.5, 1.5, 0.75 (the fourth rep failed).
        self.assertEqual(lines, ["p: the PGO build faster in 2 of 3 reps, PGO/default 0.750 (median over reps)"])

    def test_a_failed_row_says_why(self):
        by_key = {"a": row("a", [None], ["exit 1: ND_NOT_SUPPORTED"]), "b": row("b", [1.0])}
        v = compare.verdict(("5", "x", "a", "b", ">=", 0.6), by_key)
        self.assertEqual(v, "**not measured** (failed: exit 1: ND_NOT_SUPPORTED)")

    def test_an_unselected_row_is_not_judged(self):
        v = compare.verdict(("3", "x", "a", "gone", "<=", 1.25), {"a": row("a", [1.0])})
        self.assertIn("not selected", v)


class Rows(unittest.TestCase):
    def test_every_target_names_a_row_and_its_anchor(self):
        keys = {r.key for r in compare.rows(False, {"blocking": True, "sweep": True}, True)}
        for target in compare.TARGETS:
            self.assertIn(target[2], keys, target[1])
            if target[3]:
                self.assertIn(target[3], keys, target[1])

    def test_a_pgo_row_follows_its_default_row_and_runs_the_pgo_binary(self):
        rs = compare.rows(False, {"blocking": True, "sweep": True}, True)
        keys = [r.key for r in rs]
        pgo = [k for k in keys if k.endswith("-pgo")]
        self.assertEqual(len(pgo), 3)
        for k in pgo:
            self.assertEqual(keys[keys.index(k) - 1], k[: -len("-pgo")])
            self.assertTrue(rs[keys.index(k)].shown.startswith("target/pgo/nd "))
        plain = compare.rows(False, {"blocking": True, "sweep": True}, False)
        self.assertFalse([r.key for r in plain if r.key.endswith("-pgo")])


class Readiness(unittest.TestCase):
    def test_listening_sees_a_listener_and_not_a_free_port(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            self.assertFalse(compare.listening(port))
            s.listen(1)
            self.assertTrue(compare.listening(port))


if __name__ == "__main__":
    unittest.main()
