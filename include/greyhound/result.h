// The one error convention of greyhound across module edges (docs/architecture.md): a function that can fail
// returns Result<T>, a value or an Error (a code and a sentence naming the offending field, key or value,
// meant to be shown to an operator as it is). std::expected is C++23; this is the small subset we need.
// Exceptions stay inside a module (parsers may throw internally and convert at their edge) and never cross
// the hook's C ABI or the job client's C API; mains turn a Result's error into one log line or an exit code.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace greyhound {

enum class Errc {
  kInvalid,      // the input (an argument, a value read from Redis, a plan) is not acceptable
  kUnavailable,  // a service (Redis) could not be reached or timed out: worth retrying later
  kRefused,      // the service answered with an error
};

struct Error {
  Errc code = Errc::kInvalid;
  std::string reason;   // what is wrong
  std::string subject;  // what it is about (a Redis key, ...); empty: the call itself
  // The sentence to show: "<subject>: <reason>", or the reason alone.
  std::string message() const { return subject.empty() ? reason : subject + ": " + reason; }
};

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): return by value
  Result(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  static Result failure(std::string message, Errc code = Errc::kInvalid) {
    return Result(Error{code, std::move(message), {}});
  }
  // A failure about one thing (a key): error() names it first, status() keeps both parts apart.
  static Result failure_about(std::string subject, std::string reason, Errc code = Errc::kInvalid) {
    return Result(Error{code, std::move(reason), std::move(subject)});
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }
  std::string error() const { return error_.message(); }  // empty when ok()
  Errc code() const { return error_.code; }
  const Error& status() const { return error_; }

 private:
  std::optional<T> value_;
  Error error_;
};

// The result of an operation with no value.
struct Done {};
using Status = Result<Done>;
inline Status ok_status() { return Done{}; }

}  // namespace greyhound
