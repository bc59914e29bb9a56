// Result<T>: a value or an error message, the way the pure planning code reports bad input across its
// module edge (std::expected is C++23; this is the small subset we need). Errors are sentences that name
// the offending field and value, meant to be shown to an operator as they are.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace greyhound::mitigate {

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): return by value
  static Result failure(std::string message) {
    Result r;
    r.error_ = std::move(message);
    return r;
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  const T* operator->() const { return &*value_; }
  const std::string& error() const { return error_; }  // empty when ok()

 private:
  Result() = default;
  std::optional<T> value_;
  std::string error_;
};

}  // namespace greyhound::mitigate
