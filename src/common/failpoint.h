// Fail points for the fault matrix: a process dies at a chosen step, not at a chosen second.
// GREYHOUND_FAILPOINT=<name>:<token file> makes the process that reaches fail point <name> exit at once
// (std::_Exit, status kFailpointExit: no destructors, no flush, as a SIGKILL would leave it) if it can remove
// <token file>; the token makes it happen once, across restarts of the process. Unset (the default), a
// fail point costs one branch on a value read once.
#pragma once

namespace greyhound {

inline constexpr int kFailpointExit = 86;

// Fail points in the code: "plan_published" (greyhound-master: a plan is in Redis, the master's state and
// events that go with it are not yet committed).
void failpoint(const char* name);

}  // namespace greyhound
