// The one command-line flag parser of greyhound's binaries: `--name value`, `--name=value` and boolean
// `--flag`. Unknown flags, missing values and malformed numbers are errors that name the flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace greyhound {

class ArgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `value_flags` take a value, `bool_flags` do not (names without the leading "--").
  // Arguments after a bare "--" (or, if `stop_at_positional`, from the first positional on) are
  // returned by rest() untouched.
  Args(const std::vector<std::string>& argv, const std::vector<std::string>& value_flags,
       const std::vector<std::string>& bool_flags, bool stop_at_positional = false);

  bool has(const std::string& name) const;
  std::string str(const std::string& name) const;  // throws if absent
  std::string str(const std::string& name, const std::string& def) const;
  std::int64_t integer(const std::string& name) const;
  std::int64_t integer(const std::string& name, std::int64_t def) const;
  std::int64_t integer_in(const std::string& name, std::int64_t def, std::int64_t lo, std::int64_t hi) const;
  double number(const std::string& name) const;
  double number(const std::string& name, double def) const;
  bool flag(const std::string& name) const { return has(name); }
  const std::vector<std::string>& rest() const { return rest_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> rest_;
};

// Splits "1.5,2,3" into numbers; throws ArgError naming `what` on a malformed item.
std::vector<double> parse_number_list(const std::string& text, const std::string& what);
std::vector<std::int64_t> parse_integer_list(const std::string& text, const std::string& what);

// A comma list of 1 to `max_items` byte counts, each 1 B .. 4 GiB (a flag's value, e.g. the validation's P2P
// sizes). Throws ArgError naming `flag` and the bad item.
std::vector<std::uint64_t> byte_list(const std::string& text, const std::string& flag, std::size_t max_items = 4);

}  // namespace greyhound
