#include "sim/minitrain/checkpoint.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace greyhound::sim {
namespace {

namespace fs = std::filesystem;

std::string shard_path(const std::string& ckpt, int tp, int pp) {
  return ckpt + "/w.tp" + std::to_string(tp) + ".pp" + std::to_string(pp) + ".bin";
}

// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
bool write_atomically(const std::string& path, const void* bytes, std::size_t n, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    *error = "cannot write " + tmp + ": " + std::strerror(errno);
    return false;
  }
  const bool wrote = n == 0 || std::fwrite(bytes, 1, n, f) == n;
  const bool flushed = std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const int saved_errno = errno;
  std::fclose(f);
  if (!wrote || !flushed) {
    *error = "cannot write " + tmp + ": " + std::strerror(saved_errno);
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool make_dir(const std::string& dir, std::string* error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    *error = "cannot make " + dir + ": " + (ec ? ec.message() : "not a directory");
    return false;
  }
  return true;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, std::int64_t next_iteration) {
  return dir + "/iter-" + std::to_string(next_iteration);
}

bool write_shard(const std::string& ckpt, int tp, int pp, const std::vector<float>& weights, std::string* error) {
  if (!make_dir(ckpt, error)) return false;
  return write_atomically(shard_path(ckpt, tp, pp), weights.data(), weights.size() * sizeof(float), error);
}

bool read_shard(const std::string& ckpt, int tp, int pp, std::vector<float>& weights, std::string* error) {
  const std::string path = shard_path(ckpt, tp, pp);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  const std::streamoff size = in.tellg();
  const auto want = static_cast<std::streamoff>(weights.size() * sizeof(float));
  if (size != want) {
    *error = path + " holds " + std::to_string(size) + " bytes, the model needs " + std::to_string(want);
    return false;
  }
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(weights.data()), want)) {
    *error = "cannot read " + path;
    return false;
  }
  return true;
}

bool commit_checkpoint(const std::string& dir, const CheckpointMeta& m, std::string* error) {
  const std::string ckpt = checkpoint_path(dir, m.next_iteration);
  if (!make_dir(ckpt, error)) return false;
  const nlohmann::json j = {{"next_iteration", m.next_iteration}, {"tp", m.tp}, {"pp", m.pp}, {"dp", m.dp},
                            {"hidden", m.hidden}, {"layers", m.layers},
                            {"global_microbatches", m.global_microbatches}, {"seed", m.seed},
                            {"rows", m.rows}, {"lr", m.lr}};
  const std::string meta = j.dump(2) + "\n";
  if (!write_atomically(ckpt + "/meta.json", meta.data(), meta.size(), error)) return false;
  const std::string latest = "iter-" + std::to_string(m.next_iteration) + "\n";
  return write_atomically(dir + "/latest", latest.data(), latest.size(), error);
}

std::optional<CheckpointMeta> latest_checkpoint(const std::string& dir, std::string* path, std::string* error) {
  error->clear();
  std::ifstream latest(dir + "/latest");
  if (!latest) {
    if (fs::exists(dir + "/latest")) *error = "cannot read " + dir + "/latest";
    return std::nullopt;
  }
  std::string name;
  std::getline(latest, name);
  if (name.rfind("iter-", 0) != 0 || name.find('/') != std::string::npos) {
    *error = dir + "/latest: '" + name + "' does not name a checkpoint (iter-<N>)";
    return std::nullopt;
  }
  *path = dir + "/" + name;
  std::ifstream in(*path + "/meta.json");
  std::stringstream ss;
  ss << in.rdbuf();
  CheckpointMeta m;
  try {
    const nlohmann::json j = nlohmann::json::parse(ss.str());
    m.next_iteration = j.at("next_iteration").get<std::int64_t>();
    m.tp = j.at("tp").get<int>();
    m.pp = j.at("pp").get<int>();
    m.dp = j.at("dp").get<int>();
    m.hidden = j.at("hidden").get<int>();
    m.layers = j.at("layers").get<int>();
    m.global_microbatches = j.at("global_microbatches").get<int>();
    m.seed = j.at("seed").get<std::uint64_t>();
    m.rows = j.at("rows").get<int>();
    m.lr = j.at("lr").get<double>();
  } catch (const nlohmann::json::exception& e) {
    *error = *path + "/meta.json: " + (in ? e.what() : "cannot read it");
    return std::nullopt;
  }
  if (m.next_iteration < 0 || m.tp < 1 || m.pp < 1 || m.dp < 1 || m.global_microbatches < 1) {
    *error = *path + "/meta.json: next_iteration must be >= 0 and tp, pp, dp, global_microbatches >= 1";
    return std::nullopt;
  }
  return m;
}

std::string resume_mismatch(const CheckpointMeta& saved, const CheckpointMeta& job) {
  std::string why;
  const auto differ = [&](const char* what, long long s, long long j) {
    if (s == j) return;
    why += std::string(why.empty() ? "" : "; ") + what + " " + std::to_string(s) + " in the checkpoint, " +
           std::to_string(j) + " in this job";
  };
  differ("--tp", saved.tp, job.tp);
  differ("--pp", saved.pp, job.pp);
  differ("--hidden", saved.hidden, job.hidden);
  differ("--layers", saved.layers, job.layers);
  differ("global micro-batches", saved.global_microbatches, job.global_microbatches);
  differ("--seed", static_cast<long long>(saved.seed), static_cast<long long>(job.seed));
  differ("--rows", saved.rows, job.rows);
  if (saved.lr != job.lr) {
    why += std::string(why.empty() ? "" : "; ") + "--lr " + std::to_string(saved.lr) + " in the checkpoint, " +
           std::to_string(job.lr) + " in this job";
  }
  return why;
}

}  // namespace greyhound::sim
