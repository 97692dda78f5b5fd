"""The results checks, and what a build leaves behind, on made-up documents (shapes, not
benchmark figures): python3 bench/report/test_results.py"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))

from results import ResultsError, check, gather  # noqa: E402


def doc(suite: str = "python", server: str = "redis") -> dict:
    def result(path: str, rounds: list) -> dict:
        return {"scenario": "contended", "server": server, "setting": {"workers": 2}, "path": path,
                "metric": "handoffs_per_sec", "unit": "hand-offs/s", "better": "higher",
                "rounds": rounds, "median": sorted(rounds)[len(rounds) // 2]}
    return {
        "schema": "rlock-bench/1", "suite": suite, "language": "L", "title": "t", "command": "c",
        "date": "2026-01-01 00:00 UTC", "machine": {}, "build": {}, "servers": [{"id": server, "version": "v"}],
        "scenarios": [{"id": "contended", "title": "t", "primary_metric": "handoffs_per_sec"}],
        "paths": [{"scenario": "contended", "path": "a", "label": "a", "role": "rlock"},
                  {"scenario": "contended", "path": "b", "label": "b", "role": "baseline"}],
        "results": [result("a", [4, 6, 5]), result("b", [2, 1, 3])],
        "ratios": [{"scenario": "contended", "server": server, "setting": {"workers": 2},
                    "metric": "handoffs_per_sec", "path": "a", "baseline": "b", "value": 2.5}],
        "not_measured": [],
    }


class Checks(unittest.TestCase):
    def test_a_well_formed_file_passes(self) -> None:
        s = check(doc(), "f")
        self.assertEqual(s.median("contended", "redis", {"workers": 2}, "a", "handoffs_per_sec"), 5)

    def test_a_median_not_of_its_rounds_is_refused(self) -> None:
        d = doc()
        d["results"][0]["median"] = 6
        with self.assertRaisesRegex(ResultsError, "not the median"):
            check(d, "f")

    def test_a_ratio_not_of_the_files_medians_is_refused(self) -> None:
        d = doc()
        d["ratios"][0]["value"] = 3.0
        with self.assertRaisesRegex(ResultsError, "medians give"):
            check(d, "f")

    def test_missing_fields_and_schema_are_refused(self) -> None:
        d = doc()
        del d["build"]
        with self.assertRaisesRegex(ResultsError, "missing build"):
            check(d, "f")
        d = doc()
        d["schema"] = "rlock-bench/0"
        with self.assertRaisesRegex(ResultsError, "schema"):
            check(d, "f")
        d = doc()
        d["not_measured"] = [{"path": "x"}]
        with self.assertRaisesRegex(ResultsError, "without a reason"):
            check(d, "f")

    def test_files_of_one_suite_merge_and_absent_suites_are_listed(self) -> None:
        other = copy.deepcopy(doc(server="valkey"))
        run = gather({"p1.json": doc(), "p2.json": other, "m.json": doc(suite="module")})
        self.assertEqual([s.id for s in run.suites], ["module", "python"])
        python = run.suite("python")
        assert python is not None
        self.assertEqual([x["id"] for x in python.doc["servers"]], ["redis", "valkey"])
        self.assertEqual([a[0] for a in run.absent], ["node", "java", "go"])

    def test_a_scenario_neither_written_nor_listed_is_unaccounted(self) -> None:
        s = check(doc(), "f")
        self.assertEqual(s.unaccounted(), ["uncontended"])
        d = doc()
        d["not_measured"] = [{"scenario": "uncontended", "reason": "r"}]
        self.assertEqual(check(d, "f").unaccounted(), [])


class Build(unittest.TestCase):
    def test_a_plot_the_run_cannot_draw_is_removed_and_said_not_measured(self) -> None:
        import generate

        with tempfile.TemporaryDirectory() as d:
            results, out = os.path.join(d, "results"), os.path.join(d, "out")
            os.makedirs(results)
            os.makedirs(os.path.join(out, generate.PLOTS))
            with open(os.path.join(results, "python-redis.json"), "w") as f:
                json.dump(doc(), f)
            stale = os.path.join(out, generate.PLOTS, "memory.svg")
            with open(stale, "w") as f:
                f.write("<svg>an earlier run's</svg>")
            generate.build(results, out)
            self.assertFalse(os.path.exists(stale))
            with open(os.path.join(out, generate.REPORT)) as f:
                text = f.read()
            self.assertIn("memory per blocked waiter: RLOCK.ACQUIRE BLOCK against BLPOP*: not measured", text)


if __name__ == "__main__":
    unittest.main()
