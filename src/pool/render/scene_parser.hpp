#pragma once
// The scene file (docs/SCENES.md): JSON with a camera, a background, named
// materials and a list of spheres, planes and triangle meshes.
//
// Scene files travel from a job's submitter to every worker, so the parser
// treats them as hostile: the text, the JSON nesting and the number of
// values are bounded before a document is built, counts are bounded before
// anything is allocated for them, every number must be finite and in its
// range, and unknown fields are errors (a typo should not pass silently).
// Each failure is one line naming the field, e.g.
//   objects[2].radius: must be a number in (0, 1000000]
// It never throws.

#include <cstddef>
#include <string_view>

#include "core/error.hpp"
#include "pool/render/scene.hpp"

namespace runsnack::render {

inline constexpr int kMaxSceneJsonDepth = 8;
inline constexpr float kMaxCoordinate = 1e6f;  // absolute value of any position or size

// The bounds on one scene. The defaults allow a 1,000,000-triangle mesh and
// hold a parse under about 300 MB; tests lower them to probe each bound.
struct SceneLimits {
  std::size_t max_bytes = 64u << 20;
  std::size_t max_json_values = 13'000'000;  // numbers, strings, keys and containers together
  std::size_t max_materials = 1024;
  std::size_t max_objects = 100'000;  // spheres, planes and meshes together
  std::size_t max_planes = 64;
  std::size_t max_triangles = 1'000'000;
  std::size_t max_vertices = 3'000'000;
};

// A prepared scene (prepare_scene already called), or `too_large` for a
// limit, `malformed` for anything else.
Result<Scene> parse_scene(std::string_view json_text, const SceneLimits& limits = {});

}  // namespace runsnack::render
