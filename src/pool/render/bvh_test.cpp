#include "pool/render/bvh.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "pool/render/tracer.hpp"

namespace runsnack::render {
namespace {

struct Soup {
  std::vector<Material> materials{Material{}};
  std::vector<Sphere> spheres;
  std::vector<Triangle> triangles;
  Bvh bvh;

  SceneView view(bool with_bvh) const {
    SceneView v;
    v.materials = materials.data();
    v.spheres = spheres.data();
    v.num_spheres = static_cast<std::int32_t>(spheres.size());
    v.triangles = triangles.data();
    if (with_bvh) {
      v.nodes = bvh.nodes.data();
      v.num_nodes = static_cast<std::int32_t>(bvh.nodes.size());
      v.refs = bvh.refs.data();
    }
    return v;
  }
};

Soup random_soup(int spheres, int triangles, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pos(-10, 10), size(0.05f, 1.0f);
  Soup s;
  for (int i = 0; i < spheres; ++i) s.spheres.push_back(Sphere{{pos(rng), pos(rng), pos(rng)}, size(rng), 0});
  for (int i = 0; i < triangles; ++i) {
    Vec3 a{pos(rng), pos(rng), pos(rng)};
    auto near = [&] { return a + Vec3{size(rng), size(rng), size(rng)} * 2.0f - Vec3{1, 1, 1}; };
    s.triangles.push_back(Triangle{a, near(), near(), 0});
  }
  s.bvh = build_bvh(s.spheres, s.triangles);
  return s;
}

// The nearest hit by testing every primitive.
tracer::Hit brute_force(const Soup& s, Vec3 o, Vec3 d) {
  SceneView v = s.view(false);
  tracer::Hit hit;
  for (std::int32_t i = 0; i < v.num_spheres; ++i) tracer::hit_sphere(s.spheres[i], i, o, d, hit);
  for (std::size_t i = 0; i < s.triangles.size(); ++i)
    tracer::hit_triangle(s.triangles[i], static_cast<std::int32_t>(i), o, d, hit);
  return hit;
}

TEST(Bvh, FindsTheSameNearestHitAsTestingEveryPrimitive) {
  Soup s = random_soup(300, 2000, 7);
  SceneView v = s.view(true);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  int hits = 0;
  for (int i = 0; i < 3000; ++i) {
    Vec3 o{u(rng) * 15, u(rng) * 15, u(rng) * 15};
    Vec3 d = normalize(Vec3{u(rng), u(rng), u(rng)});
    tracer::Hit want = brute_force(s, o, d), got;
    bool found = tracer::intersect(v, o, d, got);
    ASSERT_EQ(found, want.kind != tracer::kNone);
    if (!found) continue;
    ++hits;
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.index, want.index);
    EXPECT_EQ(got.t, want.t);
  }
  EXPECT_GT(hits, 300);  // the rays do reach the soup
}

TEST(Bvh, StaysShallowOnDegenerateInput) {
  Soup same;  // every triangle in one place: no split plane separates them
  for (int i = 0; i < 20000; ++i) same.triangles.push_back(Triangle{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, 0});
  same.bvh = build_bvh(same.spheres, same.triangles);
  EXPECT_LT(bvh_depth(same.bvh), tracer::kStackSize);
  EXPECT_EQ(same.bvh.refs.size(), 20000u);

  Soup random = random_soup(0, 50000, 3);
  EXPECT_LT(bvh_depth(random.bvh), tracer::kStackSize);
  for (const BvhNode& n : random.bvh.nodes) EXPECT_LE(n.count, kBvhLeafSize);
}

TEST(Bvh, IsDeterministic) {
  Soup a = random_soup(100, 1000, 5), b = random_soup(100, 1000, 5);
  ASSERT_EQ(a.bvh.refs, b.bvh.refs);
  ASSERT_EQ(a.bvh.nodes.size(), b.bvh.nodes.size());
  for (std::size_t i = 0; i < a.bvh.nodes.size(); ++i) {
    EXPECT_EQ(a.bvh.nodes[i].first, b.bvh.nodes[i].first);
    EXPECT_EQ(a.bvh.nodes[i].count, b.bvh.nodes[i].count);
  }
  EXPECT_TRUE(build_bvh({}, {}).nodes.empty());
}

}  // namespace
}  // namespace runsnack::render
