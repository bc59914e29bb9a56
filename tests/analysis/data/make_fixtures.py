#!/usr/bin/env python3
"""Writes the CSV fixtures of tests/analysis/ctl_analysis_test.cpp (run from this folder; deterministic)."""
import math

def write(name, text):
    with open(name, "w", newline="\n") as f:
        f.write(text)

# An op stream: 3 warm-up calls, then 60 iterations of a 12-call pattern; iterations 30..44 take 150 ms
# instead of 100 ms. Calls of an iteration are 5 ms apart from its start.
PATTERN = [("Recv", "pp0", 4096), ("AllReduce", "tp0", 1024), ("AllReduce", "tp0", 1024), ("Send", "pp0", 4096),
           ("Recv", "pp0", 4097), ("AllReduce", "tp0", 1024), ("AllReduce", "tp0", 1024), ("Send", "pp0", 4097),
           ("Recv", "pp0", 4096), ("Send", "pp0", 4096), ("AllReduce", "dp0", 262144), ("AllReduce", "dp0", 131072)]
PATTERN_B = PATTERN[:8] * 2 + PATTERN[8:]  # after a micro-batch re-allocation: 20 calls

def ops(iterations, change_at=None):
    rows = ["t_ns,op,group,bytes"]
    t = 1_000_000_000
    for w in range(3):
        rows.append(f"{t},CommInitRank,init{w},0")
        t += 1_000_000
    for k in range(iterations):
        pattern = PATTERN_B if change_at is not None and k >= change_at else PATTERN
        for j, (op, group, nbytes) in enumerate(pattern):
            rows.append(f"{t + j * 5_000_000},{op},{group},{nbytes}")
        t += 150_000_000 if 30 <= k < 45 else 100_000_000
    return "\n".join(rows) + "\n"

write("ops_periodic.csv", ops(60))
write("ops_period_change.csv", ops(90, change_at=50))

# An iteration-time trace: 80 iterations of ~300 ms (+-1 % jitter), 1.5x slower for rows 30..54.
rows = ["t_s,iter_ms"]
t = 0.0
for i in range(80):
    ms = 300.0 * (1.0 + 0.01 * math.sin(1.7 * i)) * (1.5 if 30 <= i < 55 else 1.0)
    t += ms / 1000.0
    rows.append(f"{t:.6f},{ms:.4f}")
write("trace_slowdown.csv", "\n".join(rows) + "\n")

# Bad inputs: each names the row and column of its error.
write("empty.csv", "")
write("trace_missing_header.csv", "0.3,300\n0.6,301\n")
write("trace_non_numeric.csv", "t_s,iter_ms\n0.3,300\n0.6,301\n0.9,abc\n")
write("trace_negative_time.csv", "t_s,iter_ms\n0.3,300\n-0.6,301\n")
write("trace_wrong_columns.csv", "t_s,iter_ms\n0.3,300\n0.6,301,7\n")
write("ops_bad_bytes.csv", "t_ns,op,group,bytes\n1000,AllReduce,dp0,1024\n2000,AllReduce,dp0,12x\n")
write("ops_missing_header.csv", "1000,AllReduce,dp0,1024\n")
write("ops_negative_time.csv", "t_ns,op,group,bytes\n1000,AllReduce,dp0,1024\n-2000,AllReduce,dp0,1024\n")
