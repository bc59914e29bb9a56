// What greyhoundctl takes from its caller, checked once for every subcommand: files (bounded) and job names.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "cli/ctl_commands.h"
#include "common/args.h"
#include "greyhound/ring.h"

namespace greyhound::ctl {

std::string read_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ArgError(path + ": cannot open: " + std::strerror(errno));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw ArgError(path + ": cannot read: " + std::strerror(errno));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    throw ArgError(path + ": larger than " + std::to_string(max_bytes) + " bytes, more than this input may be");
  }
  return text;
}

std::string job_arg(const Args& args) {
  std::string job = args.str("job");
  if (auto why = job_name_error(job); !why.empty()) throw ArgError("--job: " + why);
  return job;
}

}  // namespace greyhound::ctl
