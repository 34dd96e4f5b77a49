#pragma once
// Scenes shared by the render tests (test code only).

#include <fstream>
#include <sstream>
#include <string>

#include "pool/render/scene_parser.hpp"

namespace runsnack::render::testing {

// A small closed room with every material kind and a mesh: renders fast and
// exercises every branch of the tracer.
inline const char* kRoomJson = R"({
  "camera": {"position": [0, 1, 3.4], "look_at": [0, 1, 0], "fov": 45},
  "background": [0.1, 0.1, 0.15],
  "materials": {
    "white": {"type": "diffuse"},
    "red": {"type": "diffuse", "color": [0.7, 0.1, 0.1]},
    "mirror": {"type": "mirror"},
    "glass": {"type": "glass", "ior": 1.5},
    "lamp": {"type": "emissive", "color": [1, 0.9, 0.8], "strength": 40}
  },
  "objects": [
    {"type": "plane", "point": [0, 0, 0], "normal": [0, 1, 0], "material": "white"},
    {"type": "plane", "point": [0, 0, -1], "normal": [0, 0, 1], "material": "white"},
    {"type": "plane", "point": [-1, 0, 0], "normal": [1, 0, 0], "material": "red"},
    {"type": "sphere", "center": [0, 1.7, 0], "radius": 0.15, "material": "lamp"},
    {"type": "sphere", "center": [-0.4, 0.4, -0.3], "radius": 0.4, "material": "mirror"},
    {"type": "sphere", "center": [0.45, 0.3, 0.3], "radius": 0.3, "material": "glass"},
    {"type": "mesh", "material": "white", "translate": [0.3, 0, -0.4], "scale": 0.25,
     "vertices": [-1, 0, -1, 1, 0, -1, 1, 0, 1, -1, 0, 1, 0, 2, 0],
     "indices": [0, 1, 4, 1, 2, 4, 2, 3, 4, 3, 0, 4, 0, 2, 1, 0, 3, 2]}
  ]
})";

inline Scene room_scene() { return parse_scene(kRoomJson).value(); }

inline std::string read_example(const std::string& name) {
  std::ifstream in(std::string(RUNSNACK_EXAMPLE_SCENES) + "/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace runsnack::render::testing
