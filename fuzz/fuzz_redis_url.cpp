// The Redis URL reader and the password hiding of common/redis_client.h on any text: parse_redis_url refuses
// with std::invalid_argument or gives an endpoint whose password-free URL reads back as the same endpoint
// less the password and whose description does not depend on the password; redact_redis_url (a URL without
// blanks: in a message a URL ends at a blank) and hide_redis_passwords hide all of an accepted URL's
// credentials and nothing else.
#include <stdexcept>
#include <vector>

#include "common/redis_client.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using greyhound::fuzz::check;
  const std::string text = greyhound::fuzz::text_of(data, size);
  const std::string redacted = greyhound::redact_redis_url(text);
  std::vector<char> arg(text.begin(), text.end());
  arg.push_back('\0');
  char program[] = "fuzz";
  char* argv[] = {program, arg.data(), nullptr};
  greyhound::hide_redis_passwords(2, argv);
  const std::string hidden(arg.data());

  greyhound::RedisEndpoint e;
  try {
    e = greyhound::parse_redis_url(text);
  } catch (const std::invalid_argument& error) {
    check(error.what()[0] != '\0', "a refusal says why");
    return 0;
  }
  greyhound::RedisEndpoint back;
  try {
    back = greyhound::parse_redis_url(e.url_without_password());
  } catch (const std::invalid_argument& error) {
    check(false, std::string("the password-free URL reads back: ") + error.what());
  }
  check(back.host == e.host && back.port == e.port && back.unix_path == e.unix_path && back.user == e.user &&
            back.db == e.db && back.password.empty(),
        "as the same endpoint less its password");
  check(back.describe() == e.describe(), "described without the password");
  if (!e.password.empty() && text.rfind("redis://", 0) == 0) {
    // The credentials are everything between "redis://" and the last '@'. In a message a URL ends at a
    // blank, so only a URL without one is redacted whole there; a command line holds no NUL.
    const std::size_t at = text.rfind('@');
    if (text.find(' ') == std::string::npos) {
      check(redacted == "redis://***" + text.substr(at), "redact_redis_url hides the credentials");
    }
    if (text.find('\0') == std::string::npos) {
      check(hidden == "redis://" + std::string(at - 8, '*') + text.substr(at), "hide_redis_passwords hides them");
    }
  }
  return 0;
}
