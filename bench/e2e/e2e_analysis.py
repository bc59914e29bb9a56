"""The end-to-end experiment's arithmetic (bench/e2e/run): pure functions over greyhound-simcluster reports
(docs/simulation.md, "greyhound-simcluster") and fault schedules. No I/O, standard library only, so the unit
test (tests/e2e/e2e_analysis_test.py) feeds it synthetic reports.

Terms:
- A report's iterations are the job's (iter_ms is the job's period, measured where its last rank finishes)
  and its throughput_iter_per_min comes from them.
- A fault's onset and end are its start_s and end_s on the job clock. Per fault, reaction times are
  measured from the onset to: the first detection (an agent's slowdown event, by the job time of the
  iteration that decided it, or the master's incident_open / incident_update) inside the fault's window;
  the first of the master's localisations inside the window that names it (right, below); the first plan
  the job applied (plan_applied, action apply) inside the window: the remedy in force; and from the end to
  the first plan applied at or after it (a revert, or the split for the faults still active): the
  remedy's end.
- A localisation (the master's localised event) is right when it names a fault active at its time, or
  active until at most `slack_s` before it (a profile window ends after the evidence): a gpu or cpu fault
  by its rank as the culprit, a link fault by its two nodes among the suspect links. One that names a rank
  or a link and is not right is wrong. One that names nothing (no culprit, no suspect link) is neither: a
  miss while a fault is active (counted as `missed`), an all-clear otherwise (a re-profile after the end).
"""

import math

LOCALISATION_SLACK_S = 5.0


def median(values):
    v = sorted(values)
    if not v:
        return float("nan")
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def healthy_period_s(report, skip=3):
    """Median job period of a (healthy) report in seconds, leaving out `skip` warm-up iterations."""
    its = report.get("iterations", [])
    ms = [it["iter_ms"] for it in its[skip:]] or [it["iter_ms"] for it in its]
    if not ms:
        raise ValueError("the report has no iterations")
    return median(ms) * 1e-3


def iteration_start_s(report, index):
    """Job time at which iteration `index` began in a report (the end of the one before), extrapolated with
    the healthy period past the report's last iteration."""
    its = report.get("iterations", [])
    if not its:
        raise ValueError("the report has no iterations")
    period = healthy_period_s(report)
    if index <= 0:
        return its[0]["t_s"] - its[0]["iter_ms"] * 1e-3
    if index - 1 < len(its):
        return its[index - 1]["t_s"]
    return its[-1]["t_s"] + (index - len(its)) * period


def schedule_to_seconds(schedule, healthy_report):
    """Faults stated in iterations of the healthy job (start_iter, end_iter) as the simulator's schedule in
    seconds, from the healthy run's measured iteration times; every other field is kept."""
    out = []
    for i, f in enumerate(schedule["faults"]):
        if "start_iter" not in f or "end_iter" not in f:
            raise ValueError("faults[%d]: needs start_iter and end_iter" % i)
        if not (0 <= f["start_iter"] < f["end_iter"]):
            raise ValueError("faults[%d]: needs 0 <= start_iter < end_iter" % i)
        g = {k: v for k, v in f.items() if k not in ("start_iter", "end_iter")}
        g["start_s"] = round(iteration_start_s(healthy_report, f["start_iter"]), 3)
        g["end_s"] = round(iteration_start_s(healthy_report, f["end_iter"]), 3)
        out.append(g)
    return out


def recovered_share(healthy, without, with_):
    """Share of the throughput the faults cost that a remedy won back: (with - without) / (healthy - without);
    None when the faults cost nothing measurable."""
    lost = healthy - without
    if not lost > 0:
        return None
    return (with_ - without) / lost


def events(report, type_, source=None):
    out = []
    for e in report.get("events", []):
        if e.get("type") != type_:
            continue
        if source is not None and not str(e.get("source", "")).startswith(source):
            continue
        out.append(e)
    return sorted(out, key=lambda e: e.get("t_s", 0.0))


def localisation_names(fault, detail):
    """Whether a localised event's detail names `fault`."""
    if fault["kind"] in ("gpu", "cpu"):
        return detail.get("culprit", -1) == fault["rank"]
    pair = sorted(fault["nodes"])
    for link in detail.get("suspect_links", []):
        if sorted(link.get("nodes", [])) == pair:
            return True
    return False


def active(fault, t_s, slack_s=0.0):
    return fault["start_s"] <= t_s < fault["end_s"] + slack_s


def names_nothing(detail):
    return detail.get("culprit", -1) < 0 and not detail.get("suspect_links")


def localisation_tally(report, faults, slack_s=LOCALISATION_SLACK_S):
    """Right, wrong and missed localisations and all-clears (see the module's terms), with each wrong or
    missed one's time and what it named."""
    right, wrong, missed, clear = 0, [], [], 0
    for e in events(report, "localised", "master"):
        d = e.get("detail") or {}
        t = e.get("t_s", 0.0)
        what = {"t_s": t, "culprit": d.get("culprit", -1), "cause": d.get("cause"),
                "suspect_links": [l.get("nodes") for l in d.get("suspect_links", [])]}
        if any(active(f, t, slack_s) and localisation_names(f, d) for f in faults):
            right += 1
        elif not names_nothing(d):
            wrong.append(what)
        elif any(active(f, t) for f in faults):
            missed.append(what)
        else:
            clear += 1
    return {"right": right, "wrong": len(wrong), "missed": len(missed), "all_clear": clear,
            "wrong_events": wrong, "missed_events": missed}


def detection_time(report, fault):
    """Job time of the first detection inside the fault's window, or None."""
    times = []
    for e in events(report, "slowdown", "agent"):
        t = e.get("detected_t_s", -1)
        if t is None or t < 0:
            t = e.get("t_s", 0.0)
        times.append(t)
    for type_ in ("incident_open", "incident_update"):
        times += [e.get("t_s", 0.0) for e in events(report, type_, "master")]
    inside = [t for t in times if active(fault, t)]
    return min(inside) if inside else None


def _applied(report):
    out = []
    for e in events(report, "plan_applied"):
        d = e.get("detail") or {}
        out.append((e.get("t_s", 0.0), d.get("action", "apply"), d.get("strategy"), d.get("epoch")))
    return out


def mean_period_ms(report, start_s, end_s):
    """Mean job period of the iterations that ended in [start_s, end_s); None when none did."""
    ms = [it["iter_ms"] for it in report.get("iterations", []) if start_s <= it["t_s"] < end_s]
    return sum(ms) / len(ms) if ms else None


def iterations_ended(report, start_s, end_s):
    """How many of the job's iterations ended in (start_s, end_s]: counted from a fault's onset, the iteration
    the fault began in is the first (an iteration that ended within a millisecond after the onset, the
    schedule's rounding, counts although it hardly saw the fault)."""
    return sum(1 for it in report.get("iterations", []) if start_s < it["t_s"] <= end_s)


def reaction(report, fault, period_s, slack_s=LOCALISATION_SLACK_S):
    """Per fault: the job's mean period while it was active, the job times of its detection, localisation,
    remedy in force and the remedy's end, and the delays from the onset (from the end for the remedy's end):
    in seconds (`*_after_s`), in healthy periods (`*_after_iterations`) and in the job's own iterations, those
    that ended in between (`*_after_job_iterations`); None for what did not happen."""
    onset, end = fault["start_s"], fault["end_s"]
    out = {"onset_s": onset, "end_s": end, "mean_iter_ms": mean_period_ms(report, onset, end)}
    out["detected_s"] = detection_time(report, fault)
    loc = [e.get("t_s", 0.0) for e in events(report, "localised", "master")
           if active(fault, e.get("t_s", 0.0), slack_s) and localisation_names(fault, e.get("detail") or {})]
    out["localised_s"] = min(loc) if loc else None
    applied = _applied(report)
    in_force = [t for (t, action, _, _) in applied if action == "apply" and active(fault, t)]
    out["remedy_s"] = min(in_force) if in_force else None
    after = [(t, action) for (t, action, _, _) in applied if t >= end]
    if out["remedy_s"] is not None and after:
        out["remedy_end_s"], out["remedy_end_action"] = min(after)
    else:
        out["remedy_end_s"], out["remedy_end_action"] = None, None
    for key in ("detected", "localised", "remedy"):
        t = out[key + "_s"]
        out[key + "_after_s"] = None if t is None else t - onset
        out[key + "_after_iterations"] = None if t is None else (t - onset) / period_s
        out[key + "_after_job_iterations"] = None if t is None else iterations_ended(report, onset, t)
    t = out["remedy_end_s"]
    out["remedy_end_after_s"] = None if t is None else t - end
    out["remedy_end_after_iterations"] = None if t is None else (t - end) / period_s
    out["remedy_end_after_job_iterations"] = None if t is None else iterations_ended(report, end, t)
    return out


def remedies(report):
    """The plans published, in order: time, source, strategy, action, micro-batches."""
    out = []
    for e in events(report, "plan"):
        d = e.get("detail") or {}
        out.append({"t_s": e.get("t_s", 0.0), "source": e.get("source"), "epoch": d.get("epoch"),
                    "strategy": d.get("strategy"), "action": d.get("action"),
                    "microbatches": d.get("microbatches", [])})
    return out


def validation_tally(report):
    """The validation pauses of a run (its report's "validations", simcluster's summary of the master's
    validated events): how many, how many aborted, the time paused in all and at most, and the
    verdicts by cause (gpu, host, link, none)."""
    vs = [v for v in report.get("validations") or [] if isinstance(v, dict)]
    pauses = [float(v.get("pause_s") or 0.0) for v in vs]
    causes = {}
    for v in vs:
        if not v.get("aborted"):
            c = str(v.get("cause") or "none")
            causes[c] = causes.get(c, 0) + 1
    return {"pauses": len(vs), "aborted": sum(1 for v in vs if v.get("aborted")),
            "paused_s": sum(pauses), "longest_s": max(pauses) if pauses else 0.0, "causes": causes}


def analyse_run(report, faults, period_s):
    """Everything the experiment reports about one run."""
    return {
        "throughput_iter_per_min": report.get("throughput_iter_per_min", 0.0),
        "iterations": len(report.get("iterations", [])),
        "exit_code": report.get("exit_code"),
        "detections": len(events(report, "incident_open", "master")),
        "localisations": localisation_tally(report, faults),
        "faults": [dict(reaction(report, f, period_s), label=f.get("label", "")) for f in faults],
        "remedies": remedies(report),
        "plans_applied": len(events(report, "plan_applied")),
        "validations": validation_tally(report),
    }


def summarise(runs):
    """The shares from the four ways' throughputs: `runs` maps healthy, without, with and oracle to
    analyse_run results (or at least their throughput_iter_per_min)."""
    tp = {k: v["throughput_iter_per_min"] for k, v in runs.items()}
    out = {"throughput_iter_per_min": tp}
    if all(k in tp for k in ("healthy", "without", "with")):
        out["recovered_share"] = recovered_share(tp["healthy"], tp["without"], tp["with"])
    if all(k in tp for k in ("healthy", "without", "oracle")):
        out["oracle_recovered_share"] = recovered_share(tp["healthy"], tp["without"], tp["oracle"])
    if all(k in tp for k in ("without", "with", "oracle")):
        gained = tp["oracle"] - tp["without"]
        out["share_of_oracle"] = (tp["with"] - tp["without"]) / gained if gained > 0 else None
    return out


def fmt(x, spec="%.1f"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return spec % x
