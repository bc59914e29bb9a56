#include "common/private_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace greyhound {

std::string file_trust_problem(const struct stat& st, uid_t owner, bool directory) {
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return S_ISLNK(st.st_mode) ? "is a symbolic link" : directory ? "not a directory" : "not a regular file";
  }
  if (st.st_uid != owner) {
    return "owned by uid " + std::to_string(st.st_uid) + ", not by uid " + std::to_string(owner) +
           " (this process's user)";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("writable by other users (mode ") + mode + ")";
  }
  return "";
}

int open_private_file(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (error) {
      *error = path + ": " + (errno == ELOOP ? std::string("is a symbolic link") : std::strerror(errno));
    }
    return -1;
  }
  struct stat st {};
  std::string why = fstat(fd, &st) != 0 ? std::string("cannot stat: ") + std::strerror(errno)
                                        : file_trust_problem(st, geteuid());
  if (!why.empty()) {
    ::close(fd);
    if (error) *error = path + ": " + why;
    return -1;
  }
  return fd;
}

bool ensure_private_directory(const std::string& path, std::string* error) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    if (error) *error = path + ": cannot create: " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (error) *error = path + ": cannot stat: " + std::strerror(errno);
    return false;
  }
  if (std::string why = file_trust_problem(st, geteuid(), true); !why.empty()) {
    if (error) *error = path + ": " + why;
    return false;
  }
  return true;
}

}  // namespace greyhound
