#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>


namespace greyhound {

void init_logging(const std::string& program, LogLevel default_level) {
  const EnvConfig env = read_env_config();
  const LogLevel level = env.log_level_set ? env.log_level : default_level;
  auto logger = spdlog::get(program);
  if (!logger) logger = spdlog::stderr_color_mt(program);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %n %^%l%$: %v");
  spdlog::level::level_enum l = spdlog::level::info;
  switch (level) {
    case LogLevel::kTrace: l = spdlog::level::trace; break;
    case LogLevel::kDebug: l = spdlog::level::debug; break;
    case LogLevel::kInfo: l = spdlog::level::info; break;
    case LogLevel::kWarn: l = spdlog::level::warn; break;
    case LogLevel::kError: l = spdlog::level::err; break;
    case LogLevel::kOff: l = spdlog::level::off; break;
  }
  logger->set_level(l);
  spdlog::set_default_logger(logger);
}

}  // namespace greyhound
