// The ring reader (greyhound/ring.h) on corrupted rings: a healthy ring of 64 records, with some records
// written, is overwritten by the input's patches (each: a 16-bit offset, a length byte, that many bytes) and
// cut to a length the input chooses, then opened and read as the agent and greyhoundctl dump read one. It
// never crashes or reads outside the file, refuses a ring whose header does not fit the file, and returns
// only complete records, in sequence order, counting what it skipped.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "greyhound/ring.h"

namespace {

using greyhound::fuzz::check;

struct Image {
  std::string dir;
  std::string path;
  std::vector<char> bytes;
};

std::string g_dir;  // removed at exit

void remove_dir() {
  if (g_dir.empty()) return;
  unlink((g_dir + "/greyhound.fuzz.3").c_str());
  unlink((g_dir + "/greyhound.fuzz.corrupt").c_str());
  rmdir(g_dir.c_str());
}

const Image& healthy() {
  static const Image image = [] {
    Image im;
    char dir[] = "/tmp/gh-fuzz-ring-XXXXXX";
    check(mkdtemp(dir) != nullptr, "a private directory");
    im.dir = dir;
    g_dir = dir;
    std::atexit(remove_dir);
    std::string error;
    greyhound::RingIdentity id;
    id.job = "fuzz";
    id.rank = 3;
    auto writer = greyhound::RingWriter::create(im.dir, "greyhound.fuzz.3", 64, id, &error);
    check(writer != nullptr, "a healthy ring: " + error);
    for (int i = 0; i < 40; ++i) {
      greyhound::RecordPayload p{};
      p.t_ns = 1000u * i;
      p.bytes = 4096;
      p.group_rank = -1;
      p.group_size = -1;
      p.peer = -1;
      p.root = -1;
      writer->append(p);
    }
    im.path = writer->path();
    const int fd = open(im.path.c_str(), O_RDONLY);
    struct stat st {};
    fstat(fd, &st);
    im.bytes.resize(static_cast<std::size_t>(st.st_size));
    check(read(fd, im.bytes.data(), im.bytes.size()) == static_cast<ssize_t>(im.bytes.size()), "read the ring");
    close(fd);
    im.path = im.dir + "/greyhound.fuzz.corrupt";
    return im;
  }();
  return image;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Image& im = healthy();
  std::vector<char> bytes = im.bytes;
  std::size_t i = 0;
  // The first two bytes: how much of the file to keep (0xffff: all of it, else that many 64-byte units).
  std::size_t keep = bytes.size();
  if (size >= 2) {
    const unsigned units = data[0] | (data[1] << 8);
    if (units != 0xffff) keep = std::min<std::size_t>(bytes.size() + 4096, std::size_t{units} * 64);
    i = 2;
  }
  while (i + 3 <= size) {
    const std::size_t offset = (data[i] | (data[i + 1] << 8)) % bytes.size();
    const std::size_t len = std::min<std::size_t>(data[i + 2], size - (i + 3));
    for (std::size_t k = 0; k < len && offset + k < bytes.size(); ++k) bytes[offset + k] = static_cast<char>(data[i + 3 + k]);
    i += 3 + len;
  }
  bytes.resize(keep, 0);

  const int fd = open(im.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  check(fd >= 0, "write the corrupted ring");
  check(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()), "write it whole");
  close(fd);

  std::string error;
  auto reader = greyhound::RingReader::open(im.path, &error);
  if (!reader) {
    check(!error.empty(), "a refusal says why");
    return 0;
  }
  check(greyhound::ring_file_size(reader->capacity()) <= bytes.size(), "an accepted ring fits its file");
  (void)reader->job();
  (void)reader->writer_exit_status();
  (void)reader->in_call();
  (void)reader->dropped();
  for (bool oldest : {true, false}) {
    if (oldest) reader->seek_oldest(); else reader->seek_end();
    std::vector<greyhound::RecordPayload> out;
    greyhound::RingPollStats stats;
    std::uint64_t now = 0;
    for (int round = 0; round < 4; ++round) {
      const std::size_t before = out.size();
      const std::size_t n = reader->poll(out, 256, stats, now += 2'000'000'000ull, 1'000'000'000ull);
      check(out.size() == before + n, "poll appends what it says");
      for (std::size_t k = before + 1 < out.size() ? before + 1 : out.size(); k < out.size(); ++k) {
        check(out[k].seq > out[k - 1].seq, "records in sequence order");
      }
      if (n == 0) break;
    }
  }
  return 0;
}
