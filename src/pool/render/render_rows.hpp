#pragma once
// The thread-free parts of rendering a rectangle (render_rows.cpp), shared by
// render_rect's threads (render.cpp) and render_rect_serial, which the
// WebAssembly kernels (src/pool/wasm/) build without threads.

#include "core/error.hpp"
#include "pool/render/geometry.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene.hpp"

namespace runsnack::render::detail {

// The errors render_rect returns for bad settings, a bad rect or an unprepared scene.
Result<void> check_render(const Scene& scene, const RenderSettings& settings, TileRect rect);

// Row `row` of `rect` as linear RGB: rect.w * 3 floats at `out`.
void render_row(const SceneView& view, int spp, TileRect rect, int row, float* out);

}  // namespace runsnack::render::detail
