#include "agent/nccl_ring.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/private_file.h"
#include "greyhound/ring.h"
#include "greyhound/validate/graph_dump.h"

namespace greyhound::agent {

Result<NcclRingDump> nccl_ring_of(std::string_view graph_xml, std::string_view topo_xml, int group_rank, int group_size,
                                  std::string* tree_error) {
  using R = Result<NcclRingDump>;
  const auto ranks = validate::parse_topology_dump_ranks(topo_xml);
  if (!ranks) return R::failure(ranks.error());
  const auto rings = validate::parse_graph_dump_rings(graph_xml, *ranks);
  if (!rings) return R::failure(rings.error());
  if (rings->empty() || rings->front().ranks.empty()) return R::failure("graph dump: its ring graph has no GPU");
  const validate::DumpedRing& ring = rings->front();
  for (int r : ring.ranks) {
    if (r >= group_size) {
      return R::failure("rank " + std::to_string(r) + " in a dump of a communicator of " + std::to_string(group_size) +
                        " (a dump of another communicator)");
    }
  }
  if (std::find(ring.ranks.begin(), ring.ranks.end(), group_rank) == ring.ranks.end()) {
    return R::failure("the dump's ring does not hold rank " + std::to_string(group_rank) +
                      ", which dumped it (a dump of another communicator)");
  }
  NcclRingDump d;
  d.group_rank = group_rank;
  d.segment = ring.ranks;
  d.crosses_nodes = ring.crosses_nodes;
  d.channels = static_cast<int>(std::min<std::size_t>(rings->size(), 1024));
  const auto tree = validate::parse_graph_dump_tree(graph_xml, *ranks);
  std::string why;
  if (!tree) {
    if (tree.status().code != Errc::kUnavailable) why = tree.error();
  } else if (!std::is_permutation(tree->chains.front().ranks.begin(), tree->chains.front().ranks.end(),
                                  ring.ranks.begin(), ring.ranks.end())) {
    why = "the tree graph's chain does not hold the ring's ranks";
  } else {
    d.tree = NcclTreeChain{tree->pattern, tree->chains.front().ranks, tree->chains.front().crosses_nodes};
  }
  if (tree_error) *tree_error = why;
  return d;
}

namespace {

constexpr off_t kMaxCopyBytes = 4 << 20;

// The file's text, if it is this user's own file; kUnavailable when absent.
Result<std::string> read_own(const std::string& path) {
  using R = Result<std::string>;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return R::failure(path + ": absent", Errc::kUnavailable);
    return R::failure(path + ": cannot be opened");
  }
  struct stat st {};
  std::string why = fstat(fd, &st) != 0 ? "cannot be read" : file_trust_problem(st, geteuid());
  if (why.empty() && st.st_size > kMaxCopyBytes) why = "larger than 4 MiB";
  std::string text;
  if (why.empty()) {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  if (!why.empty()) return R::failure(path + ": " + why);
  return text;
}

}  // namespace

Result<NcclRingDump> take_nccl_ring(const std::string& ring_path, std::uint64_t group_id, int group_rank, int group_size,
                                    std::string* tree_error) {
  using R = Result<NcclRingDump>;
  const std::string graph_path = nccl_dump_copy_path(ring_path, group_id, true);
  const std::string topo_path = nccl_dump_copy_path(ring_path, group_id, false);
  const auto graph = read_own(graph_path);
  if (!graph && graph.status().code == Errc::kUnavailable) {
    ::unlink(topo_path.c_str());  // a topology copy whose graph copy could not be written
    return R(Error{Errc::kUnavailable, graph.error(), {}});
  }
  const auto topo = read_own(topo_path);
  // Ours or not, the copies are not read again: a refused one would be refused each time.
  ::unlink(graph_path.c_str());
  ::unlink(topo_path.c_str());
  if (!graph) return R::failure(graph.error());
  if (!topo) return R::failure(topo.error());
  return nccl_ring_of(*graph, *topo, group_rank, group_size, tree_error);
}

}  // namespace greyhound::agent
