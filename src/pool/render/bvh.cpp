#include "pool/render/bvh.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace runsnack::render {
namespace {

struct Box {
  Vec3 lo{1e30f, 1e30f, 1e30f};
  Vec3 hi{-1e30f, -1e30f, -1e30f};

  void grow(Vec3 p) {
    lo = min_v(lo, p);
    hi = max_v(hi, p);
  }
  void grow(const Box& b) {
    lo = min_v(lo, b.lo);
    hi = max_v(hi, b.hi);
  }
  bool empty() const { return lo.x > hi.x; }
  float area() const {
    if (empty()) return 0;
    Vec3 e = hi - lo;
    return 2.0f * (e.x * e.y + e.y * e.z + e.z * e.x);
  }
};

struct PrimInfo {
  Box box;
  Vec3 centroid;
};

class Builder {
 public:
  Builder(std::vector<PrimInfo> prims, Bvh& out) : prims_(std::move(prims)), out_(out) {}

  void build() {
    std::size_t n = prims_.size();
    out_.refs.resize(n);
    for (std::size_t i = 0; i < n; ++i) out_.refs[i] = static_cast<PrimRef>(i);
    if (n == 0) return;
    out_.nodes.reserve(2 * n / kBvhLeafSize + 1);
    out_.nodes.emplace_back();
    build_node(0, 0, n, 1);
  }

 private:
  static constexpr int kBins = 16;

  void build_node(std::size_t node, std::size_t first, std::size_t count, int depth) {
    Box bounds, centroids;
    for (std::size_t i = first; i < first + count; ++i) {
      const PrimInfo& p = prims_[out_.refs[i]];
      bounds.grow(p.box);
      centroids.grow(p.centroid);
    }
    out_.nodes[node].lo = bounds.lo;
    out_.nodes[node].hi = bounds.hi;
    if (count <= static_cast<std::size_t>(kBvhLeafSize)) return make_leaf(node, first, count);

    std::size_t mid = depth < kBvhSahDepth ? sah_split(first, count, bounds, centroids) : 0;
    if (mid == 0) mid = count_split(first, count, centroids);
    if (mid == 0) return make_leaf(node, first, count);  // cannot happen: count > leaf size

    std::int32_t left = static_cast<std::int32_t>(out_.nodes.size());
    out_.nodes.emplace_back();
    out_.nodes.emplace_back();
    out_.nodes[node].first = left;
    out_.nodes[node].count = 0;
    build_node(static_cast<std::size_t>(left), first, mid, depth + 1);
    build_node(static_cast<std::size_t>(left) + 1, first + mid, count - mid, depth + 1);
  }

  void make_leaf(std::size_t node, std::size_t first, std::size_t count) {
    out_.nodes[node].first = static_cast<std::int32_t>(first);
    out_.nodes[node].count = static_cast<std::int32_t>(count);
  }

  // Best binned SAH split: the size of the left part, or 0 when no split beats a leaf.
  std::size_t sah_split(std::size_t first, std::size_t count, const Box& bounds, const Box& centroids) {
    float best_cost = static_cast<float>(count) * bounds.area();  // cost of a leaf
    int best_axis = -1, best_bin = 0;
    for (int axis = 0; axis < 3; ++axis) {
      float lo = component(centroids.lo, axis), hi = component(centroids.hi, axis);
      if (!(hi > lo)) continue;
      std::array<Box, kBins> bin_box;
      std::array<std::size_t, kBins> bin_count{};
      float scale = kBins / (hi - lo);
      for (std::size_t i = first; i < first + count; ++i) {
        const PrimInfo& p = prims_[out_.refs[i]];
        int b = bin_of(component(p.centroid, axis), lo, scale);
        bin_box[b].grow(p.box);
        ++bin_count[b];
      }
      // Sweep from the right for the right-hand costs, then from the left.
      std::array<float, kBins> right_cost{};
      Box acc;
      std::size_t acc_count = 0;
      for (int b = kBins - 1; b > 0; --b) {
        acc.grow(bin_box[b]);
        acc_count += bin_count[b];
        right_cost[b] = static_cast<float>(acc_count) * acc.area();
      }
      acc = Box{};
      acc_count = 0;
      for (int b = 0; b < kBins - 1; ++b) {
        acc.grow(bin_box[b]);
        acc_count += bin_count[b];
        if (acc_count == 0 || acc_count == count) continue;
        float cost = static_cast<float>(acc_count) * acc.area() + right_cost[b + 1];
        if (cost < best_cost) {
          best_cost = cost;
          best_axis = axis;
          best_bin = b;
        }
      }
    }
    if (best_axis < 0) return 0;
    float lo = component(centroids.lo, best_axis), hi = component(centroids.hi, best_axis);
    float scale = kBins / (hi - lo);
    return partition(first, count, [&](const PrimInfo& p) {
      return bin_of(component(p.centroid, best_axis), lo, scale) <= best_bin;
    });
  }

  // Half the primitives on each side, ordered along the widest centroid axis.
  std::size_t count_split(std::size_t first, std::size_t count, const Box& centroids) {
    Vec3 extent = centroids.hi - centroids.lo;
    int axis = extent.x >= extent.y && extent.x >= extent.z ? 0 : (extent.y >= extent.z ? 1 : 2);
    auto begin = out_.refs.begin() + static_cast<std::ptrdiff_t>(first);
    std::size_t half = count / 2;
    // Ties broken by reference so the order (and so the tree) is fixed.
    std::nth_element(begin, begin + static_cast<std::ptrdiff_t>(half),
                     begin + static_cast<std::ptrdiff_t>(count), [&](PrimRef a, PrimRef b) {
                       float ca = component(prims_[a].centroid, axis),
                             cb = component(prims_[b].centroid, axis);
                       return ca < cb || (ca == cb && a < b);
                     });
    return half;
  }

  static int bin_of(float c, float lo, float scale) {
    int b = static_cast<int>((c - lo) * scale);
    return b < 0 ? 0 : (b >= kBins ? kBins - 1 : b);
  }

  template <class Pred>
  std::size_t partition(std::size_t first, std::size_t count, Pred goes_left) {
    std::size_t i = first, j = first + count;
    while (i < j) {
      if (goes_left(prims_[out_.refs[i]])) {
        ++i;
      } else {
        --j;
        std::swap(out_.refs[i], out_.refs[j]);
      }
    }
    return i - first;
  }

  std::vector<PrimInfo> prims_;
  Bvh& out_;
};

int depth_of(const Bvh& bvh, std::size_t node) {
  const BvhNode& n = bvh.nodes[node];
  if (n.count > 0) return 1;
  return 1 + std::max(depth_of(bvh, static_cast<std::size_t>(n.first)),
                      depth_of(bvh, static_cast<std::size_t>(n.first) + 1));
}

}  // namespace

Bvh build_bvh(std::span<const Sphere> spheres, std::span<const Triangle> triangles) {
  std::vector<PrimInfo> prims;
  prims.reserve(spheres.size() + triangles.size());
  for (const Sphere& s : spheres) {
    Vec3 r{s.radius, s.radius, s.radius};
    PrimInfo p;
    p.box.grow(s.center - r);
    p.box.grow(s.center + r);
    p.centroid = s.center;
    prims.push_back(p);
  }
  for (const Triangle& t : triangles) {
    PrimInfo p;
    p.box.grow(t.a);
    p.box.grow(t.b);
    p.box.grow(t.c);
    p.centroid = (t.a + t.b + t.c) * (1.0f / 3.0f);
    prims.push_back(p);
  }
  Bvh bvh;
  Builder(std::move(prims), bvh).build();
  return bvh;
}

int bvh_depth(const Bvh& bvh) { return bvh.nodes.empty() ? 0 : depth_of(bvh, 0); }

}  // namespace runsnack::render
