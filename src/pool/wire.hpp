#pragma once
// The pool's wire helpers: base64 and hex for bytes inside JSON messages, and
// the limits on what a peer may send (docs/ARCHITECTURE.md section 13, rule 6: bounded peer input).
//
// Messages on "pool-worker" and "pool-client" streams are length-prefixed
// JSON (session/session.hpp), one request and one answer at a time:
//   request  {"op": "<name>", ...}
//   answer   {"ok": true, ...} | {"ok": false, "error": "<one line>"}
//
// "pool-worker" (worker.cpp -> Coordinator::serve_worker -> WorkerOps, worker_ops.hpp: one function
// per op), in the order a worker uses them:
//   register    public_key, device {kind, name, score, price, runs?, max_task_seconds?},
//               holding [task ids it still answers for]
//               -> device, lease_ms, calibrate {seed, iterations} (calibration.hpp)
//   calibrated  checkpoints                     -> score (the coordinator's measure, not the hint)
//   claim       max                             -> tasks [...] | task null, retry_ms (nothing to do)
//   input       job, have? [sha256 hex], frames?, shard?, parts?
//                                               -> input (the job's input, once per worker, or per
//                                                  shard for a workload that reads its shard's
//                                                  files only: each file with its sha256; its data
//                                                  inline, in a frame, by digest only when the
//                                                  worker named it in "have", or "fetch": true)
//   input_part  job, sha256, offset             -> size, one frame: a "fetch" file's chunk
//                                                  (pool/training_data.hpp)
//   heartbeat                                   -> (extends the worker's leases)
//   result      task, attempt, exit_code, stdout (base64), files, signature (hex), stderr?,
//               frames? (binary frames follow, below)
//   failed      task, attempt, reason
//   abandon     task, attempt                   -> (a capped device's task past its cap: pending
//                                                  again, try unspent; no more tasks of its job)
//   results     results [result | failed ...]   -> answers [...] (one transaction)
// "pool-client" (cli/cmd_pool.cpp -> Coordinator::serve_client -> ClientOps, client_ops.hpp):
//   submit      workload, spec, input, budget?, retries?, allow_failures?, prefer?
//                                               -> job, tasks, free_only
//   status | jobs  job?                         -> jobs [{state, counts, failures, spending, ...}]
//   result      job, shard                      -> result {exit_code, stdout (base64), files} | null
//   cancel      job                             -> (the job stops; its unspent escrow returns)
//   credits                                     -> peer, balance, entries
//   train       spec, input, weights, budget?   -> training, free_only, missing [sha256] (pool/trainer.hpp)
//   train_upload  training, sha256, offset, data (base64, one 4 MiB chunk)
//                                               -> complete, remaining (files still to come)
//   train_status  training?                     -> trainings [{state, rounds_done, metrics, ...}]
//   train_result  training                      -> its status and weights (base64 safetensors)
//   train_cancel  training                      -> (it stops; its weights so far stay readable)

#include "core/error.hpp"

#include <cstdint>
#include <string>
#include <span>
#include <string_view>
#include <vector>

namespace runsnack::pool {

inline constexpr std::uint32_t kMaxPoolMessageBytes = 12 * 1024 * 1024;
inline constexpr std::size_t kMaxStdoutBytes = 1024 * 1024;       // per task; more is an error
inline constexpr std::size_t kMaxStderrTailBytes = 4096;          // the end of a failed command's stderr
inline constexpr std::size_t kMaxOutFilesBytes = 5 * 1024 * 1024;  // per task, under out/ (a 1024x1024 float32 tile is 4 MiB)
inline constexpr std::size_t kMaxInputBytes = 4 * 1024 * 1024;     // per job, sent once per worker
inline constexpr std::size_t kMaxKeptInputsNamed = 256;            // "input"'s "have": digests a worker keeps
inline constexpr std::int64_t kMaxShards = 100'000;

// Binary frames: bulk bytes (a matmul tile) that follow a pool message raw,
// instead of as base64 inside its JSON. A worker's "result" announces its
// frames ("frames": n; in a "results" batch, each result its own, in order),
// and they follow the message back to back, each
//   u32 big-endian length | length bytes
// at most kMaxFrameBytes together.
inline constexpr std::size_t kMaxFrameBytes = 12 * 1024 * 1024;
inline constexpr std::int64_t kMaxFramesPerResult = 16;
inline constexpr std::size_t kFrameHeaderBytes = 4;

std::string frame_header(std::size_t length);
// The length a header announces, if it fits in `budget` (what is left of
// the message's kMaxFrameBytes).
Result<std::uint32_t> frame_length(std::span<const std::uint8_t, kFrameHeaderBytes> header, std::size_t budget);
// `count` frames from bytes as they come on the wire, which must hold them
// exactly (tests and fuzzing; the coordinator reads them off its stream).
Result<std::vector<std::string>> split_frames(std::string_view bytes, std::size_t count, std::size_t budget = kMaxFrameBytes);

std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);
// Decodes into `out`, which must be exactly the decoded size: a caller that
// knows it (a matmul tile) saves an allocation and a copy of megabytes.
Result<void> base64_decode_into(std::string_view text, std::span<char> out);
std::string hex_encode(std::string_view bytes);
// `bytes` as valid UTF-8 (each invalid byte becomes U+FFFD): a command's
// stderr may hold anything, a JSON message may not.
std::string valid_utf8(std::string_view bytes);
Result<std::string> hex_decode(std::string_view text);

}  // namespace runsnack::pool
