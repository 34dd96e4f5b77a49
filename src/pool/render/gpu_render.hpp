#pragma once
// Rendering a rectangle on an NVIDIA GPU with the same tracer as the CPU
// (tracer.hpp), when the library was built with the CUDA toolkit.
//
// The kernel runs the very source the CPU runs, compiled without fused
// multiply-add, and tone mapping happens on the host with the CPU's code,
// so a GPU render is meant to match the CPU's bit for bit; the promise is
// PSNR above 40 dB against the CPU render (gpu_render_test.cpp).
//
// The CUDA runtime is linked statically: a binary built with CUDA starts on
// machines with no GPU and no driver, where gpu_render_available() is false.
// Uses the calling thread's current CUDA device (device 0 unless the caller
// chose another with cudaSetDevice). Thread-safe.

#include "core/error.hpp"
#include "pool/render/image.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene.hpp"

namespace runsnack::render {

// Whether this build contains the CUDA kernel.
bool gpu_render_compiled();

// Whether a CUDA device and a driver new enough for this build are present.
// Never throws or aborts; false when the build has no CUDA kernel.
bool gpu_render_available();

// As render_rect, on the GPU. `unsupported` when gpu_render_available() is
// false, `internal` with CUDA's message if a CUDA call fails (out of memory,
// a kernel fault), the same `invalid_argument`s as render_rect otherwise.
// settings.threads is ignored.
Result<RgbImage> render_rect_gpu(const Scene& scene, const RenderSettings& settings, TileRect rect);

}  // namespace runsnack::render
