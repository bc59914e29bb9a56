// The one logger setup of greyhound's daemons and tools (spdlog to stderr). libgreyhound.so does not use
// it: the hook writes its rare lines with write(2) (src/hook/runtime.h).
#pragma once

#include <string>

#include "greyhound/config.h"

namespace greyhound {

// Creates the default spdlog logger named `program`, level from GREYHOUND_LOG_LEVEL (default info for
// daemons: pass `default_level`). Safe to call more than once.
void init_logging(const std::string& program, LogLevel default_level = LogLevel::kInfo);

}  // namespace greyhound
