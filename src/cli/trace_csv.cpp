#include "cli/trace_csv.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "common/text.h"

namespace greyhound::ctl {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> cells;
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = line.find(',', from);
    cells.push_back(trim(line.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from)));
    if (comma == std::string_view::npos) return cells;
    from = comma + 1;
  }
}

// Thrown inside this file only; read_* turn it into their Result.
struct CsvError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string quote(std::string_view cell) { return "'" + printable(cell, 64) + "'"; }

// A CSV text with a fixed header, read row by row; every error names row and column.
class CsvText {
 public:
  CsvText(std::string_view text, std::vector<std::string> header) : text_(text), header_(std::move(header)) {
    std::string joined;
    for (std::size_t i = 0; i < header_.size(); ++i) joined += (i ? "," : "") + header_[i];
    std::string_view first;
    if (trim(text_).find_first_not_of("\r\n") == std::string_view::npos || !next_line(&first)) {
      throw error(1, 1, "empty file, expected the header line '" + joined + "'");
    }
    const auto cells = split(first);
    const bool same = cells.size() == header_.size() && std::equal(cells.begin(), cells.end(), header_.begin());
    if (!same) {
      std::size_t column = 0;
      while (column < header_.size() && column < cells.size() && cells[column] == header_[column]) ++column;
      throw error(row_, column + 1, "missing header: expected '" + joined + "', got " + quote(trim(first)));
    }
  }

  // Next data row (blank lines are skipped); false at the end of the text.
  bool next(std::vector<std::string_view>* cells) {
    std::string_view line;
    do {
      if (!next_line(&line)) return false;
    } while (trim(line).empty());
    *cells = split(line);
    if (cells->size() != header_.size()) {
      throw error(row_, std::min(cells->size(), header_.size()) + 1,
                  "expected " + std::to_string(header_.size()) + " columns, got " + std::to_string(cells->size()));
    }
    return true;
  }

  CsvError error(std::size_t row, std::size_t column, const std::string& what) const {
    std::string name = column >= 1 && column <= header_.size() ? " (" + header_[column - 1] + ")" : "";
    return CsvError("row " + std::to_string(row) + ", column " + std::to_string(column) + name + ": " + what);
  }
  CsvError error(std::size_t column, const std::string& what) const { return error(row_, column, what); }

  double number(std::string_view cell, std::size_t column) const {
    const std::optional<double> v = parse_decimal(cell);
    if (!v) throw error(column, quote(cell) + " is not a finite number");
    return *v;
  }

  std::uint64_t unsigned_integer(std::string_view cell, std::size_t column) const {
    if (!cell.empty() && cell[0] == '-') throw error(column, quote(cell) + " is negative");
    const bool digits = !cell.empty() && cell.find_first_not_of("0123456789") == std::string_view::npos;
    const std::string s(digits ? cell : std::string_view());
    errno = 0;
    const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
    if (!digits || errno != 0) throw error(column, quote(cell) + " is not a non-negative integer");
    return v;
  }

 private:
  bool next_line(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    const std::size_t nl = text_.find('\n', pos_);
    const std::size_t end = nl == std::string_view::npos ? text_.size() : nl;
    *line = text_.substr(pos_, end - pos_);
    pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
    ++row_;
    return true;
  }

  std::string_view text_;
  std::vector<std::string> header_;
  std::size_t pos_ = 0;
  std::size_t row_ = 0;
};

}  // namespace

Result<std::vector<OpRow>> read_op_trace(std::string_view text) {
  try {
    CsvText csv(text, {"t_ns", "op", "group", "bytes"});
    std::vector<OpRow> rows;
    std::vector<std::string_view> cells;
    while (csv.next(&cells)) {
      OpRow row;
      row.t_ns = csv.unsigned_integer(cells[0], 1);
      if (cells[1].empty()) throw csv.error(2, "empty op");
      if (cells[2].empty()) throw csv.error(3, "empty group");
      row.op = cells[1];
      row.group = cells[2];
      row.bytes = csv.unsigned_integer(cells[3], 4);
      if (!rows.empty() && row.t_ns < rows.back().t_ns) {
        throw csv.error(1, std::to_string(row.t_ns) + " is earlier than the previous row's " +
                               std::to_string(rows.back().t_ns));
      }
      rows.push_back(row);
    }
    return rows;
  } catch (const CsvError& e) {
    return Result<std::vector<OpRow>>::failure(e.what());
  }
}

Result<std::vector<IterationRow>> read_iteration_trace(std::string_view text) {
  try {
    CsvText csv(text, {"t_s", "iter_ms"});
    std::vector<IterationRow> rows;
    std::vector<std::string_view> cells;
    while (csv.next(&cells)) {
      IterationRow row;
      row.t_s = csv.number(cells[0], 1);
      row.iter_ms = csv.number(cells[1], 2);
      if (row.t_s < 0.0) throw csv.error(1, "negative time " + printable(cells[0], 64));
      if (!rows.empty() && row.t_s < rows.back().t_s) {
        throw csv.error(1, printable(cells[0], 64) + " is earlier than the previous row's time");
      }
      if (row.iter_ms <= 0.0) throw csv.error(2, "iteration time " + printable(cells[1], 64) + " is not positive");
      if (row.iter_ms < 1e-3 || row.iter_ms > 1e9) {
        throw csv.error(2, "iteration time " + printable(cells[1], 64) + " ms is outside [0.001, 1e9]");
      }
      rows.push_back(row);
    }
    return rows;
  } catch (const CsvError& e) {
    return Result<std::vector<IterationRow>>::failure(e.what());
  }
}

}  // namespace greyhound::ctl
