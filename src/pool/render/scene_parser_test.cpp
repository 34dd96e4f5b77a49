#include "pool/render/scene_parser.hpp"

#include <gtest/gtest.h>

#include <string>

#include "pool/render/test_scenes.hpp"

namespace runsnack::render {
namespace {

TEST(SceneParser, AcceptsTheExamples) {
  auto cornell = parse_scene(testing::read_example("cornell.json"));
  ASSERT_TRUE(cornell) << cornell.error().what();
  EXPECT_EQ(cornell->planes.size(), 5u);
  EXPECT_EQ(cornell->spheres.size(), 3u);
  EXPECT_EQ(cornell->triangles.size(), 6u);
  EXPECT_EQ(cornell->lights.size(), 1u);
  EXPECT_TRUE(cornell->prepared);
  EXPECT_FALSE(cornell->bvh_nodes.empty());

  auto spheres = parse_scene(testing::read_example("spheres.json"));
  ASSERT_TRUE(spheres) << spheres.error().what();
  EXPECT_EQ(spheres->spheres.size(), 4u);
  EXPECT_FLOAT_EQ(spheres->camera.aperture, 0.05f);
  EXPECT_FLOAT_EQ(spheres->background.top.z, 1.0f);
}

TEST(SceneParser, AppliesDefaultsAndMeshTransform) {
  auto scene = parse_scene(R"({
    "camera": {"position": [0, 0, 5], "look_at": [0, 0, 0]},
    "materials": {"m": {"type": "glass"}},
    "objects": [{"type": "mesh", "material": "m", "translate": [1, 2, 3], "scale": 2,
                 "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0], "indices": [0, 1, 2]}]
  })");
  ASSERT_TRUE(scene) << scene.error().what();
  EXPECT_FLOAT_EQ(scene->camera.fov_degrees, 40);
  EXPECT_FLOAT_EQ(scene->camera.up.y, 1);
  EXPECT_FLOAT_EQ(scene->exposure, 1);
  EXPECT_FLOAT_EQ(scene->materials[0].ior, 1.5f);
  ASSERT_EQ(scene->triangles.size(), 1u);
  EXPECT_FLOAT_EQ(scene->triangles[0].b.x, 3);  // 1 * 2 + 1
  EXPECT_FLOAT_EQ(scene->triangles[0].c.y, 4);  // 1 * 2 + 2
  EXPECT_FLOAT_EQ(scene->triangles[0].a.z, 3);
}

// A valid scene with `object` as its only object, `materials` as its materials.
std::string with_object(const std::string& object) {
  return R"({"camera": {"position": [0, 0, 5], "look_at": [0, 0, 0]},
             "materials": {"m": {"type": "diffuse"}}, "objects": [)" +
         object + "]}";
}

std::string with_material(const std::string& material) {
  return R"({"camera": {"position": [0, 0, 5], "look_at": [0, 0, 0]}, "materials": {"m": )" + material +
         R"(}, "objects": []})";
}

std::string with_camera(const std::string& camera) {
  return R"({"camera": )" + camera + R"(, "materials": {"m": {"type": "diffuse"}}, "objects": []})";
}

struct BadCase {
  std::string json;
  std::string message;  // the error must contain this
};

TEST(SceneParser, RejectsEachKindOfBadInputWithANamedError) {
  const std::string ok_camera = R"("camera": {"position": [0, 0, 5], "look_at": [0, 0, 0]})";
  const BadCase cases[] = {
      {"", "scene: not valid JSON"},
      {"{\"camera\": ", "scene: not valid JSON"},
      {"[1, 2]", "scene: must be a JSON object"},
      {"{" + ok_camera + R"(, "materials": {"m": {}}, "objects": [], "lights": []})",
       "lights: unknown field"},
      {R"({"materials": {"m": {"type": "diffuse"}}, "objects": []})", "camera: missing"},
      {"{" + ok_camera + R"(, "objects": []})", "materials: missing"},
      {"{" + ok_camera + R"(, "materials": {}, "objects": []})", "materials: must be an object of named"},
      {"{" + ok_camera + R"(, "materials": {"m": {"type": "diffuse"}}})", "objects: missing"},
      {"{" + ok_camera + R"(, "materials": {"m": {"type": "diffuse"}}, "objects": {}})",
       "objects: must be an array"},
      {"{" + ok_camera + R"(, "materials": {"m": {"type": "diffuse"}}, "objects": [], "exposure": 0})",
       "exposure: must be a number in (0, 1000]"},
      {"{" + ok_camera + R"(, "materials": {"m": {"type": "diffuse"}}, "objects": [], "background": "blue"})",
       "background: must be [r, g, b]"},
      {"{" + ok_camera +
           R"(, "materials": {"m": {"type": "diffuse"}}, "objects": [], "background": {"top": [1, 1, 1]}})",
       "background.bottom: missing"},
      {with_camera("[0, 0, 5]"), "camera: must be an object"},
      {with_camera(R"({"position": [0, 0], "look_at": [0, 0, 0]})"),
       "camera.position: must be an array of 3"},
      {with_camera(R"({"position": [0, 0, "5"], "look_at": [0, 0, 0]})"), "camera.position: each of the 3"},
      {with_camera(R"({"position": [0, 0, 1e39], "look_at": [0, 0, 0]})"), "camera.position: each of the 3"},
      {with_camera(R"({"position": [0, 0, 5]})"), "camera.look_at: missing"},
      {with_camera(R"({"position": [0, 0, 5], "look_at": [0, 0, 5]})"),
       "camera.look_at: equals camera.position"},
      {with_camera(R"({"position": [0, 0, 5], "look_at": [0, 0, 0], "up": [0, 0, 1]})"),
       "camera.up: zero or parallel"},
      {with_camera(R"({"position": [0, 0, 5], "look_at": [0, 0, 0], "fov": 180})"),
       "camera.fov: must be a number in (0, 179]"},
      {with_camera(R"({"position": [0, 0, 5], "look_at": [0, 0, 0], "aperture": -1})"), "camera.aperture"},
      {with_camera(R"({"position": [0, 0, 5], "look_at": [0, 0, 0], "zoom": 2})"),
       "camera.zoom: unknown field"},
      {with_material("[]"), "materials.m: must be an object"},
      {with_material("{}"), "materials.m.type: missing"},
      {with_material(R"({"type": "metal"})"), "materials.m.type: must be \"diffuse\""},
      {with_material(R"({"type": "diffuse", "ior": 1.3})"),
       "materials.m.ior: unknown field for a diffuse material"},
      {with_material(R"({"type": "diffuse", "color": [1.5, 0, 0]})"),
       "materials.m.color: each of the 3 numbers must be in [0, 1]"},
      {with_material(R"({"type": "mirror", "strength": 2})"),
       "materials.m.strength: unknown field for a mirror"},
      {with_material(R"({"type": "glass", "ior": 0.5})"), "materials.m.ior: must be a number in [1, 4]"},
      {with_material(R"({"type": "emissive", "strength": -1})"), "materials.m.strength: must be a number"},
      {with_material(R"({"type": "emissive", "str\ngth": 1})"), "materials.m.str?gth: unknown field"},
      {with_object(R"({"type": "sphere", "center": [0, 0, 0], "radius": 1, "material": "a\tb"})"),
       "objects[0].material: no material named \"a?b\""},
      {with_object("7"), "objects[0]: must be an object"},
      {with_object(R"({"type": "cube", "material": "m"})"), "objects[0].type: must be \"sphere\""},
      {with_object(R"({"type": "sphere", "center": [0, 0, 0], "radius": 1})"),
       "objects[0].material: missing"},
      {with_object(R"({"type": "sphere", "center": [0, 0, 0], "radius": 1, "material": "x"})"),
       "objects[0].material: no material named \"x\""},
      {with_object(R"({"type": "sphere", "radius": 1, "material": "m"})"), "objects[0].center: missing"},
      {with_object(R"({"type": "sphere", "center": [0, 0, 0], "radius": 0, "material": "m"})"),
       "objects[0].radius: must be a number in (0, 1000000]"},
      {with_object(
           R"({"type": "sphere", "center": [0, 0, 0], "radius": 1, "material": "m", "normal": [0, 1, 0]})"),
       "objects[0].normal: unknown field for a sphere"},
      {with_object(R"({"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 0], "material": "m"})"),
       "objects[0].normal: must not be zero"},
      {with_object(R"({"type": "mesh", "material": "m", "indices": [0, 1, 2]})"),
       "objects[0].vertices: missing"},
      {with_object(R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1], "indices": [0, 0, 0]})"),
       "objects[0].vertices: must be a flat array"},
      {with_object(
           R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, "x", 0, 1, 0], "indices": [0, 1, 2]})"),
       "objects[0].vertices: element 5 is not a number"},
      {with_object(
           R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0], "indices": [0, 1]})"),
       "objects[0].indices: must be a flat array"},
      {with_object(
           R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0], "indices": [0, 1, 3]})"),
       "objects[0].indices: element 2 must be an integer in [0, 3)"},
      {with_object(
           R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0], "indices": [0, -1, 2]})"),
       "objects[0].indices: element 1 must be an integer"},
      {with_object(
           R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0], "indices": [0, 1.5, 2]})"),
       "objects[0].indices: element 1 must be an integer"},
      {with_object(
           R"({"type": "mesh", "material": "m", "scale": 1e6, "vertices": [0, 0, 0, 2, 0, 0, 0, 1, 0], "indices": [0, 1, 2]})"),
       "objects[0].vertices: vertex 1 (scaled and translated)"},
  };
  for (const BadCase& c : cases) {
    auto r = parse_scene(c.json);
    ASSERT_FALSE(r) << "accepted: " << c.json;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos)
        << "got \"" << r.error().message << "\", want \"" << c.message << "\" for " << c.json;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

TEST(SceneParser, BoundsHostileInput) {
  auto deep = parse_scene(std::string(100000, '[') + std::string(100000, ']'));
  ASSERT_FALSE(deep);
  EXPECT_TRUE(deep.error().is(errc::too_large)) << deep.error().what();
  EXPECT_NE(deep.error().message.find("nested deeper"), std::string::npos);

  auto huge = parse_scene(std::string(SceneLimits{}.max_bytes + 1, ' '));
  ASSERT_FALSE(huge);
  EXPECT_TRUE(huge.error().is(errc::too_large));
}

// Each count limit, probed with lowered limits so the inputs stay small.
TEST(SceneParser, EnforcesEachCountLimit) {
  const std::string sphere = R"({"type": "sphere", "center": [0, 0, 0], "radius": 1, "material": "m"})";
  const std::string plane = R"({"type": "plane", "point": [0, 0, 0], "normal": [0, 1, 0], "material": "m"})";
  const std::string tri =
      R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0], "indices": [0, 1, 2, 0, 2, 1]})";
  SceneLimits limits;
  limits.max_objects = 2;
  limits.max_planes = 1;
  limits.max_triangles = 3;
  limits.max_vertices = 6;
  limits.max_materials = 1;
  struct Case {
    std::string json;
    std::string message;
  };
  const Case cases[] = {
      {with_object(sphere + "," + sphere + "," + sphere), "objects: more than 2"},
      {with_object(plane + "," + plane), "objects[1]: more than 1 planes"},
      {with_object(tri + "," + tri), "objects[1].indices: more than 3 triangles"},
      {with_object(
           R"({"type": "mesh", "material": "m", "vertices": [0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4],
                       "indices": [0, 1, 2]})"),
       "objects[0].vertices: more than 6 vertices"},
      {R"({"camera": {"position": [0, 0, 5], "look_at": [0, 0, 0]},
           "materials": {"a": {"type": "diffuse"}, "b": {"type": "diffuse"}}, "objects": []})",
       "materials: more than 1"},
  };
  for (const Case& c : cases) {
    auto r = parse_scene(c.json, limits);
    ASSERT_FALSE(r) << c.json;
    EXPECT_TRUE(r.error().is(errc::too_large)) << r.error().what();
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(parse_scene(with_object(sphere + "," + tri), limits));  // at the limits is fine

  SceneLimits few_values;
  few_values.max_json_values = 20;
  auto values = parse_scene(with_object(sphere), few_values);
  ASSERT_FALSE(values);
  EXPECT_NE(values.error().message.find("more than 20 JSON values"), std::string::npos);
  SceneLimits few_bytes;
  few_bytes.max_bytes = 10;
  EXPECT_TRUE(parse_scene(with_object(sphere), few_bytes).error().is(errc::too_large));
}

}  // namespace
}  // namespace runsnack::render
