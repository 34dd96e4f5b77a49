#pragma once
// The tracer's view (tracer.hpp) of a prepared scene for one render, with
// pointers into the scene's host arrays; the GPU path swaps in device copies.

#include "pool/render/geometry.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene.hpp"

namespace runsnack::render {

// `scene` must outlive the view.
SceneView host_scene_view(const Scene& scene, const RenderSettings& settings);

}  // namespace runsnack::render
