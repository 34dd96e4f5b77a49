#include "pool/render/scene_parser.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "pool/render/json_bounds.hpp"

namespace runsnack::render {
namespace {

using nlohmann::json;

// A name from the file as it may appear in a one-line message: at most 64
// bytes, anything but printable ASCII shown as '?'.
std::string printable(std::string_view name) {
  std::string out(name.substr(0, 64));
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  if (name.size() > 64) out += "...";
  return out;
}

Error bad(const std::string& path, const std::string& what) {
  return fail(errc::malformed, path + ": " + what);
}

std::string field(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string range_text(double lo, double hi, bool lo_open) {
  auto num = [](double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  std::string text(lo_open ? "(" : "[");
  text += num(lo);
  text += ", ";
  text += num(hi);
  text += "]";
  return text;
}

Result<void> only_fields(const json& obj, const std::string& path,
                         std::initializer_list<std::string_view> allowed, std::string_view what = "") {
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || key == a;
    if (!ok)
      return bad(field(path, printable(key)),
                 what.empty() ? "unknown field" : "unknown field for " + std::string(what));
  }
  return {};
}

Result<float> number_value(const json& v, const std::string& path, double lo, double hi, bool lo_open) {
  if (v.is_number()) {
    double d = v.get<double>();
    if (std::isfinite(d) && (lo_open ? d > lo : d >= lo) && d <= hi) return static_cast<float>(d);
  }
  return bad(path, "must be a number in " + range_text(lo, hi, lo_open));
}

// obj[key] as a number in [lo, hi] (or (lo, hi]); `fallback` when absent, an error when absent without one.
Result<float> number(const json& obj, const std::string& path, std::string_view key,
                     std::optional<float> fallback, double lo, double hi, bool lo_open = false) {
  auto it = obj.find(key);
  std::string name = field(path, key);
  if (it == obj.end()) {
    if (fallback) return *fallback;
    return bad(name, "missing");
  }
  return number_value(*it, name, lo, hi, lo_open);
}

Result<Vec3> vec3(const json& obj, const std::string& path, std::string_view key,
                  std::optional<Vec3> fallback, double lo, double hi) {
  auto it = obj.find(key);
  std::string name = field(path, key);
  if (it == obj.end()) {
    if (fallback) return *fallback;
    return bad(name, "missing");
  }
  if (!it->is_array() || it->size() != 3) return bad(name, "must be an array of 3 numbers");
  float c[3];
  for (std::size_t i = 0; i < 3; ++i) {
    auto r = number_value((*it)[i], name, lo, hi, false);
    if (!r) return bad(name, "each of the 3 numbers must be in " + range_text(lo, hi, false));
    c[i] = *r;
  }
  return Vec3{c[0], c[1], c[2]};
}

Result<std::string> text(const json& obj, const std::string& path, std::string_view key) {
  auto it = obj.find(key);
  std::string name = field(path, key);
  if (it == obj.end()) return bad(name, "missing");
  if (!it->is_string()) return bad(name, "must be a string");
  return it->get<std::string>();
}

Result<Camera> parse_camera(const json& j) {
  const std::string path = "camera";
  if (!j.is_object()) return bad(path, "must be an object");
  if (auto r = only_fields(j, path, {"position", "look_at", "up", "fov", "aperture", "focus_distance"}); !r)
    return r.error();
  Camera c;
  auto position = vec3(j, path, "position", std::nullopt, -kMaxCoordinate, kMaxCoordinate);
  if (!position) return position.error();
  auto look_at = vec3(j, path, "look_at", std::nullopt, -kMaxCoordinate, kMaxCoordinate);
  if (!look_at) return look_at.error();
  auto up = vec3(j, path, "up", Vec3{0, 1, 0}, -kMaxCoordinate, kMaxCoordinate);
  if (!up) return up.error();
  auto fov = number(j, path, "fov", 40.0f, 0, 179, true);
  if (!fov) return fov.error();
  auto aperture = number(j, path, "aperture", 0.0f, 0, 1000);
  if (!aperture) return aperture.error();
  auto focus = number(j, path, "focus_distance", 0.0f, 0, 2 * kMaxCoordinate);
  if (!focus) return focus.error();
  c.position = *position;
  c.look_at = *look_at;
  c.up = *up;
  c.fov_degrees = *fov;
  c.aperture = *aperture;
  c.focus_distance = *focus;
  return c;
}

Result<Background> parse_background(const json& root) {
  auto it = root.find("background");
  if (it == root.end()) return Background{};
  const std::string path = "background";
  if (it->is_array()) {
    auto c = vec3(root, "", "background", std::nullopt, 0, 1000);
    if (!c) return c.error();
    return Background{*c, *c};
  }
  if (!it->is_object()) return bad(path, "must be [r, g, b] or {\"top\": [r, g, b], \"bottom\": [r, g, b]}");
  if (auto r = only_fields(*it, path, {"top", "bottom"}); !r) return r.error();
  auto top = vec3(*it, path, "top", std::nullopt, 0, 1000);
  if (!top) return top.error();
  auto bottom = vec3(*it, path, "bottom", std::nullopt, 0, 1000);
  if (!bottom) return bottom.error();
  return Background{*top, *bottom};
}

Result<Material> parse_material(const json& j, const std::string& path) {
  if (!j.is_object()) return bad(path, "must be an object");
  auto type = text(j, path, "type");
  if (!type) return type.error();
  Material m;
  const Vec3 white{1, 1, 1};
  if (*type == "diffuse") {
    if (auto r = only_fields(j, path, {"type", "color"}, "a diffuse material"); !r) return r.error();
    m.kind = MaterialKind::diffuse;
    auto c = vec3(j, path, "color", Vec3{0.8f, 0.8f, 0.8f}, 0, 1);
    if (!c) return c.error();
    m.color = *c;
  } else if (*type == "mirror") {
    if (auto r = only_fields(j, path, {"type", "color"}, "a mirror material"); !r) return r.error();
    m.kind = MaterialKind::mirror;
    auto c = vec3(j, path, "color", Vec3{0.95f, 0.95f, 0.95f}, 0, 1);
    if (!c) return c.error();
    m.color = *c;
  } else if (*type == "glass") {
    if (auto r = only_fields(j, path, {"type", "color", "ior"}, "a glass material"); !r) return r.error();
    m.kind = MaterialKind::glass;
    auto c = vec3(j, path, "color", white, 0, 1);
    if (!c) return c.error();
    auto ior = number(j, path, "ior", 1.5f, 1, 4);
    if (!ior) return ior.error();
    m.color = *c;
    m.ior = *ior;
  } else if (*type == "emissive") {
    if (auto r = only_fields(j, path, {"type", "color", "strength"}, "an emissive material"); !r)
      return r.error();
    m.kind = MaterialKind::emissive;
    auto c = vec3(j, path, "color", white, 0, 1);
    if (!c) return c.error();
    auto strength = number(j, path, "strength", 1.0f, 0, 1e6);
    if (!strength) return strength.error();
    m.color = *c;
    m.strength = *strength;
  } else {
    return bad(field(path, "type"), "must be \"diffuse\", \"mirror\", \"glass\" or \"emissive\"");
  }
  return m;
}

using MaterialIds = std::map<std::string, std::int32_t, std::less<>>;

Result<std::int32_t> material_ref(const json& obj, const std::string& path, const MaterialIds& ids) {
  auto name = text(obj, path, "material");
  if (!name) return name.error();
  auto it = ids.find(*name);
  if (it == ids.end()) {
    return bad(field(path, "material"), "no material named \"" + printable(*name) + "\"");
  }
  return it->second;
}

// Appends a mesh's triangles to scene.triangles. The scene's triangle count
// and `vertex_total` (all meshes so far) are checked against the limits
// before anything is allocated for this mesh.
Result<void> parse_mesh(const json& j, const std::string& path, std::int32_t material,
                        const SceneLimits& limits, Scene& scene, std::size_t& vertex_total) {
  if (auto r =
          only_fields(j, path, {"type", "vertices", "indices", "material", "translate", "scale"}, "a mesh");
      !r)
    return r.error();
  auto vs = j.find("vertices");
  if (vs == j.end()) return bad(field(path, "vertices"), "missing");
  if (!vs->is_array() || vs->size() % 3 != 0 || vs->empty())
    return bad(field(path, "vertices"), "must be a flat array of x, y, z numbers (a multiple of 3)");
  auto is = j.find("indices");
  if (is == j.end()) return bad(field(path, "indices"), "missing");
  if (!is->is_array() || is->size() % 3 != 0 || is->empty())
    return bad(field(path, "indices"), "must be a flat array of vertex indices (a multiple of 3)");
  std::size_t n_vertices = vs->size() / 3, n_triangles = is->size() / 3;
  vertex_total += n_vertices;
  if (vertex_total > limits.max_vertices)
    return fail(errc::too_large, field(path, "vertices") + ": more than " +
                                     std::to_string(limits.max_vertices) + " vertices in the scene");
  if (scene.triangles.size() + n_triangles > limits.max_triangles)
    return fail(errc::too_large, field(path, "indices") + ": more than " +
                                     std::to_string(limits.max_triangles) + " triangles in the scene");
  auto translate = vec3(j, path, "translate", Vec3{}, -kMaxCoordinate, kMaxCoordinate);
  if (!translate) return translate.error();
  auto scale = number(j, path, "scale", 1.0f, 0, kMaxCoordinate, true);
  if (!scale) return scale.error();

  std::vector<Vec3> vertices(n_vertices);
  const std::string vpath = field(path, "vertices");
  for (std::size_t i = 0; i < n_vertices; ++i) {
    float c[3];
    for (std::size_t k = 0; k < 3; ++k) {
      const json& v = (*vs)[3 * i + k];
      if (!v.is_number()) return bad(vpath, "element " + std::to_string(3 * i + k) + " is not a number");
      double d = v.get<double>() * *scale + component(*translate, static_cast<int>(k));
      if (!std::isfinite(d) || std::fabs(d) > kMaxCoordinate)
        return bad(vpath,
                   "vertex " + std::to_string(i) + " (scaled and translated) must be within +-1000000");
      c[k] = static_cast<float>(d);
    }
    vertices[i] = Vec3{c[0], c[1], c[2]};
  }
  const std::string ipath = field(path, "indices");
  scene.triangles.reserve(scene.triangles.size() + n_triangles);
  for (std::size_t t = 0; t < n_triangles; ++t) {
    std::size_t idx[3];
    for (std::size_t k = 0; k < 3; ++k) {
      const json& v = (*is)[3 * t + k];
      // nlohmann keeps non-negative integers as unsigned: anything else is a float or negative.
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= n_vertices)
        return bad(ipath, "element " + std::to_string(3 * t + k) + " must be an integer in [0, " +
                              std::to_string(n_vertices) + ")");
      idx[k] = static_cast<std::size_t>(v.get<std::uint64_t>());
    }
    scene.triangles.push_back(Triangle{vertices[idx[0]], vertices[idx[1]], vertices[idx[2]], material});
  }
  return {};
}

Result<void> parse_object(const json& j, const std::string& path, const MaterialIds& ids,
                          const SceneLimits& limits, Scene& scene, std::size_t& vertex_total) {
  if (!j.is_object()) return bad(path, "must be an object");
  auto type = text(j, path, "type");
  if (!type) return type.error();
  if (*type != "sphere" && *type != "plane" && *type != "mesh")
    return bad(field(path, "type"), "must be \"sphere\", \"plane\" or \"mesh\"");
  auto material = material_ref(j, path, ids);
  if (!material) return material.error();
  if (*type == "sphere") {
    if (auto r = only_fields(j, path, {"type", "center", "radius", "material"}, "a sphere"); !r)
      return r.error();
    auto center = vec3(j, path, "center", std::nullopt, -kMaxCoordinate, kMaxCoordinate);
    if (!center) return center.error();
    auto radius = number(j, path, "radius", std::nullopt, 0, kMaxCoordinate, true);
    if (!radius) return radius.error();
    scene.spheres.push_back(Sphere{*center, *radius, *material});
    return {};
  }
  if (*type == "plane") {
    if (auto r = only_fields(j, path, {"type", "point", "normal", "material"}, "a plane"); !r)
      return r.error();
    if (scene.planes.size() >= limits.max_planes)
      return fail(errc::too_large, path + ": more than " + std::to_string(limits.max_planes) + " planes");
    auto point = vec3(j, path, "point", std::nullopt, -kMaxCoordinate, kMaxCoordinate);
    if (!point) return point.error();
    auto normal = vec3(j, path, "normal", std::nullopt, -kMaxCoordinate, kMaxCoordinate);
    if (!normal) return normal.error();
    if (!(length(*normal) > 1e-6f)) return bad(field(path, "normal"), "must not be zero");
    scene.planes.push_back(Plane{*point, normalize(*normal), *material});
    return {};
  }
  return parse_mesh(j, path, *material, limits, scene, vertex_total);
}

}  // namespace

Result<Scene> parse_scene(std::string_view json_text, const SceneLimits& limits) {
  if (json_text.size() > limits.max_bytes)
    return fail(errc::too_large, "scene: larger than " + std::to_string(limits.max_bytes) + " bytes");
  // Bounded before nlohmann builds a document that could take gigabytes.
  if (auto r = check_json_bounds(json_text, kMaxSceneJsonDepth, limits.max_json_values); !r)
    return Error(r.error().code, "scene: " + r.error().message);
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return fail(errc::malformed, "scene: not valid JSON");
  if (!root.is_object()) return fail(errc::malformed, "scene: must be a JSON object");
  if (auto r = only_fields(root, "", {"camera", "background", "exposure", "materials", "objects"}); !r)
    return r.error();

  Scene scene;
  auto cam = root.find("camera");
  if (cam == root.end()) return bad("camera", "missing");
  auto camera = parse_camera(*cam);
  if (!camera) return camera.error();
  scene.camera = *camera;
  auto background = parse_background(root);
  if (!background) return background.error();
  scene.background = *background;
  auto exposure = number(root, "", "exposure", 1.0f, 0, 1000, true);
  if (!exposure) return exposure.error();
  scene.exposure = *exposure;

  auto mats = root.find("materials");
  if (mats == root.end()) return bad("materials", "missing");
  if (!mats->is_object() || mats->empty()) return bad("materials", "must be an object of named materials");
  if (mats->size() > limits.max_materials)
    return fail(errc::too_large, "materials: more than " + std::to_string(limits.max_materials));
  MaterialIds ids;
  for (const auto& [name, value] : mats->items()) {
    if (name.empty() || name.size() > 64) return bad("materials", "names must be 1 to 64 characters");
    auto m = parse_material(value, "materials." + printable(name));
    if (!m) return m.error();
    ids.emplace(name, static_cast<std::int32_t>(scene.materials.size()));
    scene.materials.push_back(*m);
  }

  auto objs = root.find("objects");
  if (objs == root.end()) return bad("objects", "missing");
  if (!objs->is_array()) return bad("objects", "must be an array");
  if (objs->size() > limits.max_objects)
    return fail(errc::too_large, "objects: more than " + std::to_string(limits.max_objects));
  std::size_t vertex_total = 0;
  for (std::size_t i = 0; i < objs->size(); ++i) {
    auto r = parse_object((*objs)[i], "objects[" + std::to_string(i) + "]", ids, limits, scene, vertex_total);
    if (!r) return r.error();
  }
  if (auto r = prepare_scene(scene); !r) return fail(errc::malformed, r.error().message);
  return scene;
}

}  // namespace runsnack::render
