#include "greyhound/analysis/robust_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace greyhound::analysis {

double median(std::span<const double> values, std::vector<double>& scratch) {
  const std::size_t n = values.size();
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  scratch.assign(values.begin(), values.end());
  const auto mid = scratch.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(scratch.begin(), mid, scratch.end());
  if (n % 2 == 1) return *mid;
  const double upper = *mid;
  const double lower = *std::max_element(scratch.begin(), mid);
  return 0.5 * (lower + upper);
}

double trimmed_mean(std::span<const double> values, double trim_low, double trim_high, std::vector<double>& scratch) {
  const std::size_t n = values.size();
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  auto cut = [n](double f) { return static_cast<std::size_t>(std::floor(std::clamp(f, 0.0, 1.0) * static_cast<double>(n))); };
  std::size_t lo = cut(trim_low);
  std::size_t hi = cut(trim_high);
  if (lo + hi >= n) {  // keep at least one value, taking it from the larger trim
    const std::size_t over = lo + hi - (n - 1);
    if (hi >= lo) hi -= std::min(hi, over); else lo -= std::min(lo, over);
    if (lo + hi >= n) lo = n - 1 - hi;
  }
  double sum = 0.0;
  if (lo == 0 && hi == 0) {
    for (double v : values) sum += v;
    return sum / static_cast<double>(n);
  }
  scratch.assign(values.begin(), values.end());
  std::sort(scratch.begin(), scratch.end());
  for (std::size_t i = lo; i < n - hi; ++i) sum += scratch[i];
  return sum / static_cast<double>(n - lo - hi);
}

}  // namespace greyhound::analysis
