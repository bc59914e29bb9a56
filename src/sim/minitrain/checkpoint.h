// greyhound-minitrain's checkpoints (--checkpoint-dir), for S4: the job saves its state at an iteration
// boundary, exits with a restart request, and the launcher starts it again, possibly with fewer DP
// replicas, from the latest checkpoint with the same global batch.
//
// Layout of DIR:
//   iter-<N>/w.tp<t>.pp<p>.bin  the weights of TP shard t of pipeline stage p (raw float32, host order):
//                               every DP replica holds the same ones, so one copy per (t, p) is kept
//   iter-<N>/meta.json          what the job was: CheckpointMeta below (N = next_iteration)
//   latest                      "iter-<N>\n": the newest complete checkpoint (written last, atomically)
// Every file is written to a temporary name and renamed, so a crash leaves the previous checkpoint whole.
// Pure file I/O, no NCCL or CUDA.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace greyhound::sim {

struct CheckpointMeta {
  std::int64_t next_iteration = 0;  // the first iteration the resumed job runs
  int tp = 0, pp = 0, dp = 0;       // dp: the replicas it was written by (a resumed job may have fewer)
  int hidden = 0, layers = 0;
  int global_microbatches = 0;      // the global batch, in micro-batches
  std::uint64_t seed = 0;
  int rows = 0;                     // rows per micro-batch (with global_microbatches, the global batch)
  double lr = 0;
};

// DIR/iter-<N>.
std::string checkpoint_path(const std::string& dir, std::int64_t next_iteration);

// Writes one shard into the checkpoint directory `ckpt` (made if absent). False with *error.
bool write_shard(const std::string& ckpt, int tp, int pp, const std::vector<float>& weights, std::string* error);
// Reads one shard; it must hold exactly weights.size() floats. False with *error.
bool read_shard(const std::string& ckpt, int tp, int pp, std::vector<float>& weights, std::string* error);

// Writes meta.json into checkpoint_path(dir, meta.next_iteration), then points DIR/latest at it.
bool commit_checkpoint(const std::string& dir, const CheckpointMeta& meta, std::string* error);

// The latest checkpoint of DIR: nullopt with *error empty when there is none; nullopt with *error when
// DIR/latest or its meta.json is unreadable or malformed. *path: its directory.
std::optional<CheckpointMeta> latest_checkpoint(const std::string& dir, std::string* path, std::string* error);

// Why a job configured as `job` cannot resume from `saved` ("" when it can: the same TP and PP shape,
// model size, seed, learning rate and global batch (micro-batches and rows each); the DP width may differ).
std::string resume_mismatch(const CheckpointMeta& saved, const CheckpointMeta& job);

}  // namespace greyhound::sim
