"""The timeline of a greyhound-simcluster report: throughput over time, the injected faults, and what greyhound
did about them (detections, localisations, remedies, reverts), after the GREYHOUND paper's Figure 20.

The pure part turns a report (the JSON of `greyhound-simcluster --report`, docs/simulation.md) into a
throughput series, fault spans and event markers, with no matplotlib; `render` draws them into PNG and SVG
with matplotlib's Agg backend; `main` is scripts/plot-timeline.

Only a report's "iterations" list is required. Entries and fields that are absent, of the wrong type or of
an unknown kind are skipped, so reports with more fields or event types than these still plot.
"""
import argparse
import bisect
import json
import math
import os
import sys
from dataclasses import dataclass

DEFAULT_WINDOW_S = 5.0

# Marker kinds, in legend order, with their legend text, colour and line style.
DETECT, LOCALISE, REMEDY, REVERT, FAILED, CLOSE = "detect", "localise", "remedy", "revert", "failed", "close"
MARKER_STYLES = {
    DETECT: ("detected (incident opened)", "black", "--"),
    LOCALISE: ("localised", "#9467bd", ":"),
    REMEDY: ("remedy in force", "#2ca02c", "-"),
    REVERT: ("reverted", "#2ca02c", "-."),
    FAILED: ("plan rejected / timed out", "#d62728", "-"),
    CLOSE: ("incident closed", "black", ":"),
}

# Fault kinds (src/sim/fault_schedule.h) with their legend text and colour; other kinds get OTHER_FAULT.
FAULT_STYLES = {
    "gpu": ("slow GPU", "#d62728"),
    "link": ("congested link", "#1f77b4"),
    "cpu": ("CPU contention", "#bcbd22"),
}
OTHER_FAULT_COLOUR = "#7f7f7f"

MAIN_CURVE_COLOUR = "black"
COMPARE_CURVE_COLOURS = ["#ff7f0e", "#8c564b", "#7f7f7f", "#e377c2"]


class ReportError(Exception):
    """A report that cannot be read or is not a report; the message is one line naming the file."""


@dataclass(frozen=True)
class FaultSpan:
    kind: str  # "gpu", "link", "cpu" or whatever the report says
    start_s: float
    end_s: float
    text: str  # e.g. "throttled GPU: rank 3"


@dataclass(frozen=True)
class Marker:
    t_s: float
    kind: str  # one of MARKER_STYLES
    text: str  # short annotation, e.g. "#1 detected", "rank 3", "S2 [10,6]"


def _number(value):
    """value as a finite float, or None (bools, strings, NaN and infinities are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _node_pair(value):
    pair = _list(value)
    return pair if len(pair) == 2 and all(_int(n) is not None for n in pair) else None


def load_report(path):
    """The report at path as a dict; ReportError when it cannot be read or is no report."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise ReportError(f"{path}: cannot read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not valid JSON (not UTF-8 text)") from None
    if not isinstance(report, dict):
        raise ReportError(f"{path}: not a greyhound report (the top level is not an object)")
    if not isinstance(report.get("iterations"), list):
        raise ReportError(f"{path}: not a greyhound report (no \"iterations\" list)")
    for key in ("faults", "events"):
        if key in report and not isinstance(report[key], list):
            raise ReportError(f"{path}: not a greyhound report (\"{key}\" is not a list)")
    return report


def iteration_end_times(report):
    """The job times (s) at which the report's iterations ended, ascending; entries without a t_s are skipped."""
    ends = (_number(_dict(it).get("t_s")) for it in _list(report.get("iterations")))
    return sorted(t for t in ends if t is not None)


def throughput_series(end_times, window_s=DEFAULT_WINDOW_S):
    """Throughput in iterations per minute over a sliding window of window_s seconds, one point per iteration
    end after the first. At the end t_i of iteration i, take the earliest iteration j < i that ended at or
    after t_i - window_s (j = i - 1 when none did): the rate is i - j iterations in t_i - t_j seconds. So it
    is measured from end to end over at most the window (an iteration longer than it counts alone), needs
    no iteration before the first, and uses only end times, whatever the report's iter_ms means.
    end_times ascending; returns [(t_s, iterations_per_min)]."""
    series = []
    for i in range(1, len(end_times)):
        t = end_times[i]
        j = min(bisect.bisect_left(end_times, t - window_s, 0, i), i - 1)
        span_s = t - end_times[j]
        if span_s > 0:
            series.append((t, 60.0 * (i - j) / span_s))
    return series


def fault_spans(report):
    """The report's injected faults as spans; faults without a start before their end are skipped."""
    spans = []
    for fault in _list(report.get("faults")):
        fault = _dict(fault)
        start, end = _number(fault.get("start_s")), _number(fault.get("end_s"))
        kind = fault.get("kind")
        if start is None or end is None or end <= start or not isinstance(kind, str):
            continue
        label = fault.get("label")
        text = label if isinstance(label, str) and label else FAULT_STYLES.get(kind, (kind,))[0]
        nodes, rank = _node_pair(fault.get("nodes")), _int(fault.get("rank"))
        if nodes is not None:
            text += f": nodes {nodes[0]}-{nodes[1]}"
        elif rank is not None:
            text += f": rank {rank}"
        spans.append(FaultSpan(kind, start, end, text))
    return spans


def _localisation_text(detail):
    """What a localised event blames, shortly ("rank 3", "link 0-1", "communication"); None when nothing."""
    links = [p for p in (_node_pair(_dict(l).get("nodes")) for l in _list(detail.get("suspect_links"))) if p]
    if len(links) > 2:
        return f"{len(links)} links"
    if links:
        return ", ".join(f"link {a}-{b}" for a, b in links)
    if detail.get("cause") == "communication":
        return "communication"
    culprit = _int(detail.get("culprit"))
    return f"rank {culprit}" if culprit is not None and culprit >= 0 else None


def markers(report):
    """What greyhound did, from the report's events (src/store/messages.h, event_type), by time:
    incident_open -> DETECT; localised with a culprit or suspect links -> LOCALISE (a localisation that repeats
    the previous one of its incident is not marked again); plan_applied -> REMEDY, or REVERT for a plan whose
    action is revert, with the micro-batches of the plan event of the same epoch; plan_rejected and
    plan_timeout -> FAILED; incident_close -> CLOSE. Other events are not marked."""
    microbatches_by_epoch = {}
    for event in map(_dict, _list(report.get("events"))):
        detail = _dict(event.get("detail"))
        mb = _list(detail.get("microbatches"))
        if event.get("type") == "plan" and _int(detail.get("epoch")) is not None and mb:
            if all(_int(m) is not None for m in mb):
                microbatches_by_epoch[detail["epoch"]] = "[" + ",".join(str(m) for m in mb) + "]"

    out = []
    last_localisation = {}  # incident -> text of its last marked localisation
    for event in map(_dict, _list(report.get("events"))):
        t, kind = _number(event.get("t_s")), event.get("type")
        if t is None:
            continue
        detail = _dict(event.get("detail"))
        incident = _int(event.get("incident"))
        tag = f"#{incident} " if incident is not None and incident >= 0 else ""
        if kind == "incident_open":
            out.append(Marker(t, DETECT, tag + "detected"))
        elif kind == "incident_close":
            out.append(Marker(t, CLOSE, tag + "closed"))
        elif kind == "localised":
            text = _localisation_text(detail)
            if text is not None and last_localisation.get(incident) != text:
                last_localisation[incident] = text
                out.append(Marker(t, LOCALISE, text))
        elif kind in ("plan_applied", "plan_rejected", "plan_timeout"):
            strategy = detail.get("strategy") if isinstance(detail.get("strategy"), str) else "plan"
            mb = microbatches_by_epoch.get(_int(detail.get("epoch")))
            revert = detail.get("action") == "revert"
            if kind == "plan_applied":
                text = ("revert" if revert else strategy) + (f" {mb}" if mb else "")
                out.append(Marker(t, REVERT if revert else REMEDY, text))
            else:
                what = "revert" if revert else strategy
                out.append(Marker(t, FAILED, what + (" rejected" if kind == "plan_rejected" else " timed out")))
    out.sort(key=lambda m: m.t_s)
    return out


def default_label(report):
    return "without greyhound" if _dict(report.get("config")).get("greyhound") is False else "with greyhound"


def default_title(report, path):
    """"TP2 x DP2 x PP2 on 4 nodes, 8 micro-batches" from the report's config, else the file's name."""
    config = _dict(report.get("config"))
    tp, dp, pp = (_int(config.get(k)) for k in ("tp", "dp", "pp"))
    if None in (tp, dp, pp):
        return os.path.basename(path)
    title = f"TP{tp} x DP{dp} x PP{pp}"
    if _int(config.get("nodes")) is not None:
        title += f" on {config['nodes']} nodes"
    if _int(config.get("microbatches")) is not None:
        title += f", {config['microbatches']} micro-batches"
    return title


def default_prefix(report_path):
    """REPORT.json -> REPORT-timeline (the outputs are PREFIX.png and PREFIX.svg)."""
    stem = report_path[:-len(".json")] if report_path.endswith(".json") else report_path
    return stem + "-timeline"


def render(curves, spans, marks, out_prefix, title, window_s):
    """Draws the timeline and writes out_prefix.png and out_prefix.svg; returns their paths.
    curves: [(label, throughput series)], the main report's first; spans and marks from the main report.
    Raises ImportError without matplotlib, OSError when a file cannot be written."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib import transforms
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(11, 4.8))
    try:
        x_then_axes = transforms.blended_transform_factory(ax.transData, ax.transAxes)
        handles = []
        for n, (label, series) in enumerate(curves):
            colour = MAIN_CURVE_COLOUR if n == 0 else COMPARE_CURVE_COLOURS[(n - 1) % len(COMPARE_CURVE_COLOURS)]
            line, = ax.plot([t for t, _ in series], [r for _, r in series], color=colour,
                            linewidth=1.8 if n == 0 else 1.2, label=label, zorder=3 if n == 0 else 2)
            handles.append(line)

        for kind in dict.fromkeys(s.kind for s in spans):
            name, colour = FAULT_STYLES.get(kind, (f"{kind} fault", OTHER_FAULT_COLOUR))
            handles.append(Patch(facecolor=colour, alpha=0.18, label=name))
        for s in spans:
            colour = FAULT_STYLES.get(s.kind, (None, OTHER_FAULT_COLOUR))[1]
            ax.axvspan(s.start_s, s.end_s, color=colour, alpha=0.18, linewidth=0, zorder=1)
            ax.text(s.start_s, 0.02, " " + s.text, transform=x_then_axes, fontsize=8, color=colour,
                    ha="left", va="bottom", clip_on=True)

        for kind in (k for k in MARKER_STYLES if any(m.kind == k for m in marks)):
            name, colour, style = MARKER_STYLES[kind]
            handles.append(Line2D([], [], color=colour, linestyle=style, label=name))
        for m in marks:
            _, colour, style = MARKER_STYLES[m.kind]
            ax.axvline(m.t_s, color=colour, linestyle=style, linewidth=1.1, zorder=2.5)
            ax.text(m.t_s, 0.98, m.text + " ", transform=x_then_axes, rotation=90, fontsize=7.5, color=colour,
                    ha="right", va="top", clip_on=True)

        peak = max((r for _, series in curves for _, r in series), default=1.0)
        ax.set_ylim(0, 1.3 * peak)  # headroom for the markers' annotations
        right = max([t for _, series in curves for t, _ in series] + [s.end_s for s in spans] +
                    [m.t_s for m in marks] + [1.0])
        ax.set_xlim(0, right * 1.01)
        ax.set_xlabel("job time (s)")
        ax.set_ylabel(f"throughput (iterations/min, {window_s:g} s window)")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=min(len(handles), 5),
                  fontsize=8, frameon=False)
        png, svg = out_prefix + ".png", out_prefix + ".svg"
        fig.savefig(png, dpi=150, bbox_inches="tight")
        with matplotlib.rc_context({"svg.hashsalt": "greyhound"}):  # the same report gives the same SVG
            fig.savefig(svg, bbox_inches="tight", metadata={"Date": None})
        return png, svg
    finally:
        plt.close(fig)


USAGE_EPILOG = """\
The throughput is iterations per minute over a sliding window (--window-s, default 5 s) computed from the
iterations' end times (t_s), one point per iteration. Fault intervals come from the main report's "faults"
(shaded, one colour per kind), the markers from its "events": detections (incident opened), localisations
(culprit rank or suspect link), remedies in force (plan applied: S2 with its micro-batches, S3, S4),
reverts, rejected or timed-out plans, and incident closes. A --compare report adds only its curve.

exit status: 0 written; 2 bad arguments or a missing, unreadable or malformed report (one line on stderr);
1 matplotlib missing or an output not writable.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="plot-timeline", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=USAGE_EPILOG,
        description="Draws a greyhound-simcluster report's timeline into PREFIX.png and PREFIX.svg.")
    parser.add_argument("report", metavar="REPORT.json", help="the report (greyhound-simcluster --report)")
    parser.add_argument("--compare", action="append", default=[], metavar="LABEL=REPORT.json",
                        help="one more throughput curve from another report, e.g. 'without greyhound=b.json' "
                             "(repeatable)")
    parser.add_argument("--label", help="the main report's curve (default: \"with greyhound\", or \"without "
                                        "greyhound\" for a --no-greyhound report)")
    parser.add_argument("--out", metavar="PREFIX", help="output prefix (default: REPORT without .json + "
                                                        "\"-timeline\")")
    parser.add_argument("--title", metavar="TEXT",
                        help="plot title (default: the job's shape from the report's config)")
    parser.add_argument("--window-s", type=float, default=DEFAULT_WINDOW_S, metavar="S",
                        help=f"throughput window in seconds (default {DEFAULT_WINDOW_S:g})")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.window_s) and args.window_s > 0):
        parser.error(f"--window-s {args.window_s:g}: must be a positive number of seconds")
    compares = []
    for item in args.compare:
        label, sep, path = item.partition("=")
        if not (sep and label and path):
            parser.error(f"--compare {item!r}: expected LABEL=REPORT.json")
        compares.append((label, path))

    try:
        report = load_report(args.report)
        curves = [(args.label or default_label(report),
                   throughput_series(iteration_end_times(report), args.window_s))]
        for label, path in compares:
            curves.append((label, throughput_series(iteration_end_times(load_report(path)), args.window_s)))
    except ReportError as e:
        print(f"plot-timeline: {e}", file=sys.stderr)
        return 2

    prefix = args.out or default_prefix(args.report)
    try:
        png, svg = render(curves, fault_spans(report), markers(report), prefix,
                          args.title or default_title(report, args.report), args.window_s)
    except ImportError as e:
        print(f"plot-timeline: cannot plot: {e} (scripts/deps installs python3-matplotlib)", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"plot-timeline: cannot write {prefix}.png / .svg: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"plot-timeline: wrote {png} and {svg}")
    return 0
