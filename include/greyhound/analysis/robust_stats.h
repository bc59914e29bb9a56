// Robust location estimates used by the slowdown detectors: a median and a trimmed mean over a small span
// of iteration times. Pure functions; they copy the span into `scratch` (reused by the caller to avoid
// allocation on every iteration).
#pragma once

#include <span>
#include <vector>

namespace greyhound::analysis {

// Median of `values` (the mean of the two middle values for an even count); NaN when empty.
double median(std::span<const double> values, std::vector<double>& scratch);

// Mean of `values` after dropping the floor(trim_low * n) smallest and floor(trim_high * n) largest (at
// least one value is always kept). (0, 0) is the plain mean, (0.25, 0.25) the interquartile mean,
// (0, 0.5) the mean of the lower half. NaN when empty.
double trimmed_mean(std::span<const double> values, double trim_low, double trim_high, std::vector<double>& scratch);

}  // namespace greyhound::analysis
