// The planning code reports bad input across its module edge with the project's one Result<T>
// (greyhound/result.h): a value, or an error sentence naming the offending field and value.
#pragma once

#include "greyhound/result.h"

namespace greyhound::mitigate {

using greyhound::Result;

}  // namespace greyhound::mitigate
