#include "common/failpoint.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace greyhound {
namespace {

struct Armed {
  std::string name, token;
};

// Read once. A value without ':' or with an empty part arms nothing (and says so).
const Armed& armed() {
  static const Armed a = [] {
    Armed out;
    const char* v = std::getenv("GREYHOUND_FAILPOINT");
    if (v == nullptr || *v == '\0') return out;
    const std::string s(v);
    const auto colon = s.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) {
      std::fprintf(stderr, "greyhound: GREYHOUND_FAILPOINT must be <name>:<token file>; ignored\n");
      return out;
    }
    out.name = s.substr(0, colon);
    out.token = s.substr(colon + 1);
    return out;
  }();
  return a;
}

}  // namespace

void failpoint(const char* name) {
  const Armed& a = armed();
  if (a.name.empty() || a.name != name) return;
  if (unlink(a.token.c_str()) != 0) return;  // already taken (by an earlier run), or never laid
  std::fprintf(stderr, "greyhound: fail point %s reached: exiting with status %d\n", name, kFailpointExit);
  std::_Exit(kFailpointExit);
}

}  // namespace greyhound
