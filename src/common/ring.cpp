#include "greyhound/ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>

#include "common/clock.h"
#include "common/private_file.h"

namespace greyhound {
namespace {

std::string errno_text(const char* what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

std::uint64_t round_capacity(std::uint64_t want) {
  std::uint64_t c = 64;
  while (c < want && c < (1ull << 40)) c <<= 1;
  return c;
}

void copy_cstr(char* dst, std::size_t cap, std::string_view src) {
  const std::size_t n = std::min(cap - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// A character job names take as they are: [A-Za-z0-9_.-].
bool job_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

}  // namespace

std::string sanitize_job_name(std::string_view job) {
  std::string out;
  for (char c : job.substr(0, kRingJobMax - 1)) {
    out.push_back(job_name_char(c) ? c : '_');
  }
  if (out.empty()) out = "default";
  return out;
}

std::string job_name_error(std::string_view job) {
  if (job.empty()) return "the job name is empty";
  if (job.size() > kRingJobMax - 1) {
    return "the job name is longer than " + std::to_string(kRingJobMax - 1) + " characters";
  }
  for (std::size_t i = 0; i < job.size(); ++i) {
    const char c = job[i];
    if (!job_name_char(c)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
      return "the job name has " + (c > ' ' && c < 0x7f ? "'" + std::string(1, c) + "'" : std::string(hex)) +
             " at offset " + std::to_string(i) + ": job names take A-Z, a-z, 0-9, '_', '.' and '-'";
    }
  }
  return {};
}

std::string nccl_dump_copy_path(const std::string& ring_path, std::uint64_t group_id, bool graph) {
  const std::size_t slash = ring_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : ring_path.substr(0, slash);
  const std::string file = slash == std::string::npos ? ring_path : ring_path.substr(slash + 1);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(group_id));
  return dir + (graph ? "/nccl-graph." : "/nccl-topo.") + file + "." + hex;
}

std::string ring_file_name(std::string_view job, std::string_view rank_tag) {
  std::string name = "greyhound.";
  name += sanitize_job_name(job);
  name += '.';
  name += rank_tag;
  return name;
}

std::unique_ptr<RingWriter> RingWriter::create(const std::string& dir, const std::string& file_name,
                                               std::uint64_t capacity, const RingIdentity& id,
                                               std::string* error) {
  const std::uint64_t cap = round_capacity(capacity);
  const std::size_t bytes = ring_file_size(cap);
  const std::string path = dir + "/" + file_name;
  const std::string tmp = path + ".tmp" + std::to_string(getpid());

  // A fresh file or nothing: whatever sits at the temporary name (a file left by a crashed process with our
  // pid, or a symlink planted in a shared directory) is removed, never opened, so a hook running as root
  // cannot be made to truncate the file a link points at.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (error) *error = errno_text("cannot create", tmp);
    return nullptr;
  }
  // Mode 0600 even under a permissive umask.
  // posix_fallocate reserves the pages now: on a full tmpfs creation fails cleanly here instead of
  // the writer taking SIGBUS later.
  int rc = fchmod(fd, 0600) != 0 ? errno : posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    errno = rc;
    if (error) *error = errno_text("cannot allocate", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return nullptr;
  }
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    if (error) *error = errno_text("cannot map", tmp);
    ::unlink(tmp.c_str());
    return nullptr;
  }
  auto* h = static_cast<RingHeader*>(map);
  h->version = kRingVersion;
  h->header_size = kRingHeaderSize;
  h->record_size = kRecordSize;
  h->capacity = cap;
  h->rank = id.rank;
  h->local_rank = id.local_rank;
  h->pid = static_cast<std::int32_t>(getpid());
  h->created_mono_ns = clock_ns(CLOCK_MONOTONIC);
  h->created_real_ns = clock_ns(CLOCK_REALTIME);
  copy_cstr(h->job, kRingJobMax, sanitize_job_name(id.job));
  char host[kRingHostMax] = {};
  gethostname(host, sizeof host - 1);
  copy_cstr(h->host, kRingHostMax, host);
  h->write_index.store(0, std::memory_order_relaxed);
  h->dropped.store(0, std::memory_order_relaxed);
  h->magic.store(kRingMagic, std::memory_order_release);

  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = errno_text("cannot rename into", path);
    munmap(map, bytes);
    ::unlink(tmp.c_str());
    return nullptr;
  }
  std::unique_ptr<RingWriter> w(new RingWriter());
  w->path_ = path;
  w->header_ = h;
  w->records_ = reinterpret_cast<Record*>(static_cast<char*>(map) + kRingHeaderSize);
  w->mask_ = cap - 1;
  w->map_bytes_ = bytes;
  return w;
}

RingWriter::~RingWriter() {
  if (header_ != nullptr) munmap(header_, map_bytes_);
}

std::unique_ptr<RingReader> RingReader::open(const std::string& path, std::string* error,
                                             std::optional<uid_t> owner) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<RingReader> {
    if (error) *error = path + ": " + why;
    return nullptr;
  };
  const uid_t want_owner = owner.value_or(geteuid());
  // O_NONBLOCK: a FIFO planted at a ring's name must not block the opener (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) return fail("is a symbolic link (a ring is never read through one)");
    return fail(std::string("cannot open: ") + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return fail(std::string("cannot stat: ") + std::strerror(errno));
  }
  if (const std::string why = file_trust_problem(st, want_owner); !why.empty()) {
    ::close(fd);
    return fail(why);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < kRingHeaderSize) {
    ::close(fd);
    return fail("too small to be a ring (" + std::to_string(size) + " bytes)");
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return fail(std::string("cannot map: ") + std::strerror(errno));
  const auto* h = static_cast<const RingHeader*>(map);
  std::string why;
  if (h->magic.load(std::memory_order_acquire) != kRingMagic) {
    why = "bad magic (not a greyhound ring)";
  } else if (h->version != kRingVersion) {
    why = "ring version " + std::to_string(h->version) + ", this reader understands " +
          std::to_string(kRingVersion);
  } else if (h->header_size != kRingHeaderSize || h->record_size != kRecordSize) {
    why = "unexpected header or record size";
  } else if (h->capacity == 0 || (h->capacity & (h->capacity - 1)) != 0) {
    why = "capacity is not a power of two";
  } else if (h->capacity > (size - kRingHeaderSize) / kRecordSize) {  // not size < ring_file_size(): it can wrap
    why = "file shorter than its capacity (" + std::to_string(h->capacity) + " records)";
  }
  if (!why.empty()) {
    munmap(map, size);
    return fail(why);
  }
  std::unique_ptr<RingReader> r(new RingReader());
  r->path_ = path;
  r->header_ = h;
  r->records_ = reinterpret_cast<const Record*>(static_cast<const char*>(map) + kRingHeaderSize);
  r->mask_ = h->capacity - 1;
  r->map_bytes_ = size;
  r->dev_ = st.st_dev;
  r->ino_ = st.st_ino;
  r->owner_ = want_owner;
  r->seek_oldest();
  return r;
}

RingReader::~RingReader() {
  if (header_ != nullptr) munmap(const_cast<RingHeader*>(header_), map_bytes_);
  if (writable_header_ != nullptr) munmap(writable_header_, kRingHeaderSize);
}

RingControl* RingReader::control(std::string* error) {
  RingHeader* h = writable_header(error);
  return h != nullptr ? &h->control : nullptr;
}

PauseControl* RingReader::pause(std::string* error) {
  RingHeader* h = writable_header(error);
  return h != nullptr ? &h->pause : nullptr;
}

RingHeader* RingReader::writable_header(std::string* error) {
  if (writable_header_ == nullptr) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (error) *error = errno_text("cannot open for writing", path_);
      return nullptr;
    }
    // The same file as the one read, still trusted: the name may have been replaced since.
    struct stat st {};
    std::string why = fstat(fd, &st) != 0 ? std::string("cannot stat: ") + std::strerror(errno)
                      : st.st_dev != dev_ || st.st_ino != ino_ ? std::string("replaced since it was opened")
                                                               : file_trust_problem(st, owner_);
    if (!why.empty()) {
      ::close(fd);
      if (error) *error = path_ + ": " + why;
      return nullptr;
    }
    void* m = mmap(nullptr, kRingHeaderSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
      if (error) *error = errno_text("cannot map for writing", path_);
      return nullptr;
    }
    writable_header_ = static_cast<RingHeader*>(m);
  }
  return writable_header_;
}

void RingReader::seek_oldest() noexcept {
  const std::uint64_t wi = header_->write_index.load(std::memory_order_acquire);
  next_ = wi > capacity() ? wi - capacity() : 0;
  stuck_seq_ = ~0ull;
}

void RingReader::seek_end() noexcept {
  next_ = header_->write_index.load(std::memory_order_acquire);
  stuck_seq_ = ~0ull;
}

std::string RingReader::job() const {
  return std::string(header_->job, strnlen(header_->job, kRingJobMax));
}

bool RingReader::writer_alive() const noexcept {
  const pid_t pid = header_->pid;
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
  // A zombie (it exited; its parent has not waited for it yet) is no live writer. Without /proc, kill's word.
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* end_of_name = std::strrchr(buf, ')');  // the command name may hold anything but ends at the last ')'
  return !(end_of_name != nullptr && end_of_name[1] == ' ' && end_of_name[2] == 'Z');
}

std::optional<InCall> RingReader::in_call() const noexcept {
  const RingInCall& m = header_->in_call;
  InCall out;
  out.enter_ns = m.enter_ns.load(std::memory_order_acquire);
  if (out.enter_ns == 0) return std::nullopt;
  // Plain fields another process writes: read whole (atomically), then checked against enter_ns below.
  out.group_id = __atomic_load_n(&m.group_id, __ATOMIC_RELAXED);
  out.group_seq = __atomic_load_n(&m.group_seq, __ATOMIC_RELAXED);
  out.op = __atomic_load_n(&m.op, __ATOMIC_RELAXED);
  out.tid = __atomic_load_n(&m.tid, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (m.enter_ns.load(std::memory_order_relaxed) != out.enter_ns) return std::nullopt;  // a new call began meanwhile
  return out;
}

std::optional<int> RingReader::writer_exit_status() const noexcept {
  if (header_->life.exited.load(std::memory_order_acquire) != 1) return std::nullopt;
  return __atomic_load_n(&header_->life.exit_status, __ATOMIC_RELAXED);
}

bool RingReader::writer_exited_normally() const noexcept {
  const std::optional<int> status = writer_exit_status();
  return status && *status == 0;
}

std::size_t RingReader::poll(std::vector<RecordPayload>& out, std::size_t max, RingPollStats& stats,
                             std::uint64_t now_ns, std::uint64_t stuck_timeout_ns) {
  std::size_t n = 0;
  std::uint64_t wi = header_->write_index.load(std::memory_order_acquire);
  const std::uint64_t cap = capacity();
  while (n < max && next_ < wi) {
    if (wi - next_ > cap) {  // lapped: everything older than the last `cap` reservations is gone
      stats.lost += wi - cap - next_;
      next_ = wi - cap;
      stuck_seq_ = ~0ull;
    }
    const Record& slot = records_[next_ & mask_];
    const std::uint64_t want = 2 * next_ + 2;
    std::uint64_t s1 = slot.stamp.load(std::memory_order_acquire);
    if (s1 == want) {
      std::uint64_t w[15];
      for (int i = 0; i < 15; ++i) {
        w[i] = std::atomic_ref<const std::uint64_t>(slot.words[i]).load(std::memory_order_relaxed);
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      const std::uint64_t s2 = slot.stamp.load(std::memory_order_relaxed);
      if (s2 == want && w[14] != record_check(w)) {  // two writers at once: never accept it
        stats.lost += 1;
        ++next_;
        stuck_seq_ = ~0ull;
        continue;
      }
      if (s2 == want) {
        RecordPayload p;
        std::memcpy(&p, w, sizeof p);
        out.push_back(p);
        ++n;
        ++stats.read;
        ++next_;
        stuck_seq_ = ~0ull;
        continue;
      }
      s1 = s2;  // overwritten while copying
    }
    if (s1 > want) {  // a newer record already sits in the slot: ours was overwritten
      wi = header_->write_index.load(std::memory_order_acquire);
      const std::uint64_t resume = std::max(next_ + 1, wi > cap ? wi - cap : 0);
      stats.lost += resume - next_;
      next_ = resume;
      stuck_seq_ = ~0ull;
      continue;
    }
    // Not complete yet. Give its writer stuck_timeout_ns, then count it lost (writer died or was lapped).
    if (stuck_seq_ != next_) {
      stuck_seq_ = next_;
      stuck_since_ns_ = now_ns;
      break;
    }
    if (now_ns - stuck_since_ns_ < stuck_timeout_ns) break;
    ++stats.lost;
    ++next_;
    stuck_seq_ = ~0ull;
  }
  return n;
}

std::vector<std::string> list_ring_files(const std::string& dir, std::string_view job,
                                         std::vector<std::string>* refused) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  const std::string prefix = job.empty() ? std::string("greyhound.") : ring_file_name(job, "");
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.find(".tmp") != std::string::npos) continue;
    const std::string path = dir + "/" + name;
    // Only rings (not the agent's lock file); and the file name cannot tell job "a" with rank "b.3" from job
    // "a.b": the header can.
    std::string why;
    auto r = RingReader::open(path, &why);
    if (!r) {
      const bool lock = name.size() >= 11 && name.compare(name.size() - 11, 11, ".agent.lock") == 0;
      if (refused != nullptr && !lock) refused->push_back(why);
      continue;
    }
    if (!job.empty() && r->job() != sanitize_job_name(job)) continue;
    out.push_back(path);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<RingReader> open_process_ring(const std::string& dir, std::string_view job, pid_t pid) {
  for (const std::string& path : list_ring_files(dir, job)) {
    std::string why;
    auto r = RingReader::open(path, &why);
    if (r && r->header().pid == static_cast<std::int32_t>(pid)) return r;
  }
  return nullptr;
}

}  // namespace greyhound
