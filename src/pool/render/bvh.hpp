#pragma once
// A bounding volume hierarchy over a scene's spheres and triangles, built
// once per scene on the CPU and read by the tracer on CPU and GPU.
//
// Binned surface-area heuristic, at most kBvhLeafSize primitives per leaf.
// The build is deterministic (same input, same arrays) and keeps the depth
// under tracer::kStackSize (intersect.hpp): below kBvhSahDepth levels it
// splits by count.

#include <span>
#include <vector>

#include "pool/render/geometry.hpp"

namespace runsnack::render {

inline constexpr int kBvhLeafSize = 4;
inline constexpr int kBvhSahDepth = 32;

struct Bvh {
  std::vector<BvhNode> nodes;  // nodes[0] is the root; empty when there are no primitives
  std::vector<PrimRef> refs;   // leaf contents, see PrimRef
};

Bvh build_bvh(std::span<const Sphere> spheres, std::span<const Triangle> triangles);

// The depth of the deepest leaf (1 for a root leaf, 0 for an empty tree).
int bvh_depth(const Bvh& bvh);

}  // namespace runsnack::render
