#include "common/args.h"

#include "common/text.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace greyhound {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::int64_t to_integer(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || text.find_first_not_of("+-0123456789") != std::string::npos) {
    throw ArgError(what + ": '" + printable(text, 64) + "' is not an integer");
  }
  return v;
}

double to_number(const std::string& text, const std::string& what) {
  const std::optional<double> v = parse_decimal(text);
  if (!v) throw ArgError(what + ": '" + printable(text, 64) + "' is not a finite number");
  return *v;
}

}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::vector<std::string>& value_flags,
           const std::vector<std::string>& bool_flags, bool stop_at_positional) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      rest_.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
      return;
    }
    if (a.rfind("--", 0) != 0) {
      if (stop_at_positional) {
        rest_.assign(argv.begin() + static_cast<std::ptrdiff_t>(i), argv.end());
        return;
      }
      throw ArgError("unexpected argument '" + a + "'");
    }
    std::string name = a.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (contains(bool_flags, name)) {
      if (inline_value) throw ArgError("--" + name + " takes no value");
      values_[name] = "1";
    } else if (contains(value_flags, name)) {
      if (inline_value) {
        values_[name] = *inline_value;
      } else {
        if (i + 1 >= argv.size()) throw ArgError("--" + name + " needs a value");
        values_[name] = argv[++i];
      }
    } else {
      throw ArgError("unknown flag --" + name);
    }
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) != 0; }

std::string Args::str(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw ArgError("--" + name + " is required");
  return it->second;
}

std::string Args::str(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

std::int64_t Args::integer(const std::string& name) const { return to_integer(str(name), "--" + name); }

std::int64_t Args::integer(const std::string& name, std::int64_t def) const {
  return has(name) ? integer(name) : def;
}

std::int64_t Args::integer_in(const std::string& name, std::int64_t def, std::int64_t lo,
                              std::int64_t hi) const {
  const std::int64_t v = integer(name, def);
  if (v < lo || v > hi) {
    throw ArgError("--" + name + ": " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  }
  return v;
}

double Args::number(const std::string& name) const { return to_number(str(name), "--" + name); }

double Args::number(const std::string& name, double def) const { return has(name) ? number(name) : def; }

std::vector<double> parse_number_list(const std::string& text, const std::string& what) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(to_number(item, what));
  if (out.empty()) throw ArgError(what + ": empty list");
  return out;
}

std::vector<std::int64_t> parse_integer_list(const std::string& text, const std::string& what) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(to_integer(item, what));
  if (out.empty()) throw ArgError(what + ": empty list");
  return out;
}

std::vector<std::uint64_t> byte_list(const std::string& text, const std::string& flag, std::size_t max_items) {
  std::vector<std::uint64_t> out;
  std::string item;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') {
      item += text[i];
      continue;
    }
    char* end = nullptr;
    const unsigned long long b = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || item[0] == '-' || *end != '\0' || b == 0 || b > (1ull << 32)) {
      throw ArgError(flag + ": '" + item + "' is not a byte count from 1 to 4 GiB");
    }
    out.push_back(b);
    item.clear();
  }
  if (out.size() > max_items) throw ArgError(flag + " takes 1 to " + std::to_string(max_items) + " sizes");
  return out;
}

}  // namespace greyhound
