"""Unit test of bench/e2e/e2e_analysis.py on synthetic reports. Usage: e2e_analysis_test.py BENCH_E2E_DIR"""
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else "bench/e2e")
import e2e_analysis as ea  # noqa: E402


def its(period_ms, n, t0=1.0):
    out, t = [], t0
    for i in range(n):
        t += period_ms * 1e-3
        out.append({"index": i, "t_s": t, "iter_ms": period_ms, "loop_ms": period_ms})
    return out


GPU = {"kind": "gpu", "rank": 3, "start_s": 10.0, "end_s": 30.0, "slowdown": 1.5, "label": "gpu3"}
LINK = {"kind": "link", "nodes": [1, 0], "start_s": 40.0, "end_s": 60.0, "bandwidth_factor": 0.05}


def report_with(events):
    return {"iterations": its(500, 10), "throughput_iter_per_min": 100.0, "events": events, "exit_code": 0}


def ev(type_, t, source="master", **kw):
    e = {"type": type_, "t_s": t, "source": source}
    e.update(kw)
    return e


class Analysis(unittest.TestCase):
    def test_schedule_in_iterations_becomes_seconds_from_the_healthy_run(self):
        healthy = {"iterations": its(500, 10, t0=2.0)}  # iteration i ends at 2.5 + 0.5 i
        faults = ea.schedule_to_seconds(
            {"faults": [{"kind": "gpu", "rank": 1, "start_iter": 4, "end_iter": 14, "slowdown": 2}]}, healthy)
        self.assertEqual(faults, [{"kind": "gpu", "rank": 1, "slowdown": 2, "start_s": 4.0, "end_s": 9.0}])
        self.assertAlmostEqual(ea.healthy_period_s(healthy), 0.5)
        with self.assertRaises(ValueError):
            ea.schedule_to_seconds({"faults": [{"kind": "gpu", "rank": 1, "start_iter": 5, "end_iter": 5}]}, healthy)

    def test_recovered_share_and_share_of_the_oracle(self):
        self.assertAlmostEqual(ea.recovered_share(100.0, 80.0, 90.0), 0.5)
        self.assertAlmostEqual(ea.recovered_share(100.0, 80.0, 78.0), -0.1)
        self.assertIsNone(ea.recovered_share(100.0, 100.0, 100.0))
        s = ea.summarise({k: {"throughput_iter_per_min": v}
                          for k, v in {"healthy": 100.0, "without": 80.0, "with": 86.0, "oracle": 92.0}.items()})
        self.assertAlmostEqual(s["recovered_share"], 0.3)
        self.assertAlmostEqual(s["oracle_recovered_share"], 0.6)
        self.assertAlmostEqual(s["share_of_oracle"], 0.5)

    def test_localisations_right_and_wrong(self):
        r = report_with([
            ev("localised", 15.0, detail={"culprit": 3, "suspect_links": []}),          # right: gpu3
            ev("localised", 20.0, detail={"culprit": 2, "suspect_links": []}),          # wrong rank
            ev("localised", 33.0, detail={"culprit": 3, "suspect_links": []}),          # right: within slack
            ev("localised", 45.0, detail={"culprit": -1, "suspect_links": [{"nodes": [0, 1]}]}),  # right: link
            ev("localised", 50.0, detail={"culprit": -1, "suspect_links": [{"nodes": [1, 2]}]}),  # wrong link
            ev("localised", 70.0, detail={"culprit": 3, "suspect_links": []}),          # wrong: nothing active
            ev("localised", 16.0, source="agent:1", detail={"culprit": 3}),             # not the master's
            ev("localised", 55.0, detail={"culprit": -1, "suspect_links": []}),         # missed the link
            ev("localised", 36.0, detail={"culprit": -1, "suspect_links": []}),         # all clear
        ])
        t = ea.localisation_tally(r, [GPU, LINK])
        self.assertEqual(t["right"], 3)
        self.assertEqual(t["wrong"], 3)
        self.assertEqual([w["t_s"] for w in t["wrong_events"]], [20.0, 50.0, 70.0])
        self.assertEqual(t["missed"], 1)
        self.assertEqual(t["missed_events"][0]["t_s"], 55.0)
        self.assertEqual(t["all_clear"], 1)

    def test_reaction_times_per_fault(self):
        r = report_with([
            ev("slowdown", 12.5, source="agent:1", detected_t_s=13.0),
            ev("incident_open", 13.2),
            ev("localised", 16.0, detail={"culprit": 3}),
            ev("plan", 18.0, detail={"epoch": 1, "strategy": "S2", "action": "apply", "microbatches": [10, 6]}),
            ev("plan_applied", 18.5, detail={"epoch": 1, "strategy": "S2", "action": "apply"}),
            ev("plan_applied", 29.0, detail={"epoch": 2, "strategy": "S2", "action": "apply"}),  # before the end
            ev("plan_applied", 34.0, detail={"epoch": 3, "strategy": "S2", "action": "revert"}),
            ev("slowdown", 41.0, source="agent:0", detected_t_s=42.0),
        ])
        g = ea.reaction(r, GPU, 0.5)
        self.assertIsNone(g["mean_iter_ms"])  # the synthetic iterations all end before the fault
        r["iterations"] = its(500, 20, t0=1.0) + [{"index": 20, "t_s": 11.8, "iter_ms": 800.0}]
        # iterations ending at 10.0, 10.5, 11.0 and 11.8 s are inside [10, 30)
        self.assertAlmostEqual(ea.reaction(r, GPU, 0.5)["mean_iter_ms"], (3 * 500.0 + 800.0) / 4)
        self.assertEqual(g["detected_s"], 13.0)
        self.assertAlmostEqual(g["detected_after_iterations"], 6.0)
        self.assertEqual(g["detected_after_job_iterations"], 0)  # no iteration of the job ended after the onset
        self.assertEqual(g["localised_s"], 16.0)
        self.assertEqual(g["remedy_s"], 18.5)
        self.assertAlmostEqual(g["remedy_after_s"], 8.5)
        self.assertEqual(g["remedy_end_s"], 34.0)
        self.assertEqual(g["remedy_end_action"], "revert")
        self.assertAlmostEqual(g["remedy_end_after_iterations"], 8.0)
        # In the job's own iterations: those that ended after the onset (10 s) up to the event, the one the
        # fault began in (ends 10.5 s) the first, at 0.75 s each from 10.5 s and one at the fault's end.
        r["iterations"] = [{"index": k, "t_s": 10.5 + 0.75 * k, "iter_ms": 750.0} for k in range(40)]
        h = ea.reaction(r, GPU, 0.5)
        self.assertEqual(h["detected_after_job_iterations"], 4)    # 10.5, 11.25, 12.0, 12.75 <= 13.0
        self.assertEqual(h["localised_after_job_iterations"], 8)   # up to 15.75 <= 16.0
        self.assertEqual(h["remedy_after_job_iterations"], 11)     # up to 18.0 <= 18.5
        self.assertEqual(h["remedy_end_after_job_iterations"], 5)  # (30, 34]: 30.75 .. 33.75
        # The iteration that ends at the event is counted; the one that ends at the onset is not.
        self.assertEqual(ea.iterations_ended(r, 10.0, 12.75), 4)
        self.assertEqual(ea.iterations_ended(r, 10.5, 12.75), 3)
        link = ea.reaction(r, LINK, 0.5)
        self.assertEqual(link["detected_s"], 42.0)
        self.assertIsNone(link["localised_s"])
        self.assertIsNone(link["remedy_s"])
        self.assertIsNone(link["remedy_end_s"])  # no remedy, nothing to end
        a = ea.analyse_run(r, [GPU, LINK], 0.5)
        self.assertEqual(a["detections"], 1)
        self.assertEqual(a["plans_applied"], 3)
        self.assertEqual(a["remedies"][0]["microbatches"], [10, 6])
        self.assertEqual(a["faults"][0]["label"], "gpu3")

    def test_the_oracle_remedy_counts_without_detection(self):
        r = report_with([
            ev("plan", 10.1, source="oracle", detail={"epoch": 1, "strategy": "S2", "action": "apply"}),
            ev("plan_applied", 10.6, source="oracle", detail={"epoch": 1, "strategy": "S2", "action": "apply"}),
            ev("plan", 30.05, source="oracle", detail={"epoch": 2, "strategy": "S2", "action": "revert"}),
            ev("plan_applied", 30.5, source="oracle", detail={"epoch": 2, "strategy": "S2", "action": "revert"}),
        ])
        g = ea.reaction(r, GPU, 0.5)
        self.assertIsNone(g["detected_s"])
        self.assertAlmostEqual(g["remedy_after_s"], 0.6)
        self.assertAlmostEqual(g["remedy_end_after_s"], 0.5)
        self.assertEqual(ea.analyse_run(r, [GPU], 0.5)["detections"], 0)

    def test_validation_pauses_are_counted_with_their_time_and_verdicts(self):
        r = report_with([])
        self.assertEqual(ea.validation_tally(r), {"pauses": 0, "aborted": 0, "paused_s": 0.0, "longest_s": 0.0,
                                                  "causes": {}})
        r["validations"] = [{"id": "v1", "cause": "link", "aborted": False, "pause_s": 2.5},
                            {"id": "v2", "cause": "gpu", "aborted": False, "pause_s": 0.75},
                            {"id": "v3", "cause": "none", "aborted": True, "pause_s": 0.25},
                            {"id": "v4", "cause": "link", "aborted": False, "pause_s": 1.5}]
        t = ea.analyse_run(r, [GPU, LINK], 0.5)["validations"]
        self.assertEqual(t["pauses"], 4)
        self.assertEqual(t["aborted"], 1)
        self.assertAlmostEqual(t["paused_s"], 5.0)
        self.assertAlmostEqual(t["longest_s"], 2.5)
        self.assertEqual(t["causes"], {"link": 2, "gpu": 1})


if __name__ == "__main__":
    unittest.main()
