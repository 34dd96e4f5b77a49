#pragma once
// A worker's result as it arrives: the "result" message (coordinator.cpp)
// and the binary frames that follow it (wire.hpp). Parsing is strict and
// bounded; anything off is a one-line error.

#include "core/error.hpp"
#include "pool/task_result.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace runsnack::pool {

// How many frames follow a worker's message: a "result" announces its own,
// a "results" batch the sum of its results'. An error means the stream can
// no longer be read in step (the caller closes it).
Result<std::size_t> announced_frames(const nlohmann::json& req);

// A "result" message and the frames it announced as a TaskResult: fields,
// file paths, sizes, and every frame named by exactly one file.
Result<TaskResult> parse_result(const nlohmann::json& req, std::vector<std::string> frames);

// The frame file entry `file` names, if it names one of `frames`.
std::optional<std::size_t> frame_of(const nlohmann::json& file, std::size_t frames);

// Writes frames into their files as base64 ("data"), the form results are
// compared, stored and served in.
void inline_frames(TaskResult& r);

}  // namespace runsnack::pool
