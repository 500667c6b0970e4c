"""Tests of bench/ab's variant syntax and summary: `python3 -m unittest discover -s bench`."""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader("bench_ab", os.path.join(HERE, "ab"))
_spec = importlib.util.spec_from_loader("bench_ab", _loader)
ab = importlib.util.module_from_spec(_spec)
_loader.exec_module(ab)


class Variants(unittest.TestCase):
    def test_binary_alone_and_with_environment(self):
        self.assertEqual(ab.parse_variant("/tmp/nd.a"), ("/tmp/nd.a", {}))
        self.assertEqual(ab.parse_variant("/tmp/nd.b,A=1,B=x=y"), ("/tmp/nd.b", {"A": "1", "B": "x=y"}))

    def test_malformed_environment_is_refused(self):
        with self.assertRaises(ValueError):
            ab.parse_variant("/tmp/nd.a,NOVALUE")


class Summary(unittest.TestCase):
    def test_ratios_pair_runs_of_one_rep(self):
        base = [(0.130, 0.130), (0.130, 0.132), (0.135, 0.134)]
        new = [(0.125, 0.126), (0.130, 0.133), (0.125, 0.127)]
        anchor = [0.128, 0.120, 0.140]
        s0, s1 = ab.summarize([base, new], anchor)
        self.assertEqual((s0["to_first"], s0["faster"]), (1.0, 0))
        self.assertAlmostEqual(s1["to_first"], 0.126 / 0.130)
        self.assertEqual(s1["faster"], 2)
        self.assertAlmostEqual(s1["median"], 0.125)
        self.assertAlmostEqual(s1["iqm"], 0.127)
        self.assertAlmostEqual(s1["to_anchor"], 0.125 / 0.128)
        self.assertEqual(s1["below"], 2)
        self.assertEqual(s0["below"], 1)

    def test_no_anchor_no_anchor_ratio(self):
        (s,) = ab.summarize([[(1.0, 1.0)]], None)
        self.assertNotIn("to_anchor", s)


class MachineState(unittest.TestCase):
    def test_reps_well_above_the_lowest_floor_are_slower(self):
        self.assertEqual(ab.slower_state([0.075, 0.07, 0.09, 0.26, 0.08]), [2, 3])

    def test_a_steady_batch_has_none(self):
        self.assertEqual(ab.slower_state([0.07, 0.075, 0.08, 0.085]), [])


if __name__ == "__main__":
    unittest.main()
