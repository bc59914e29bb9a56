// Files greyhound keeps in directories other users may write to (/dev/shm, a shared --shm-dir, /tmp):
// rings, the agent's lock, simcluster's work directory. Such a file is trusted only when it is what this
// process's user made: a regular file (or directory) owned by that user and writable by it alone, never
// reached through a symbolic link. Everything here is std + POSIX (libgreyhound.so links it).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace greyhound {

// Why a file with this stat may not be trusted as `owner`'s own ("" when it may). `what` names the kind of
// file the caller wants ("a regular file" or "a directory").
std::string file_trust_problem(const struct stat& st, uid_t owner, bool directory = false);

// Opens `path` read-write, creating it (mode 0600) when absent, but only as a file this user may trust:
// never through a symbolic link, never another user's or a group- or world-writable one. The descriptor
// (close-on-exec), or -1 with *error saying why.
int open_private_file(const std::string& path, std::string* error);

// Makes `path` a directory only this user can write to: creates it (mode 0700) when absent, or accepts an
// existing one only when it is this user's, not a symbolic link and not writable by others. False with
// *error saying why.
bool ensure_private_directory(const std::string& path, std::string* error);

}  // namespace greyhound
