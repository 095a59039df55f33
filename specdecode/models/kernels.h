// What our C++ kernels share (dot8.cpp, attention.cpp, layer.cpp; built into one library by kernels.py).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace specdecode {

struct Dot8Part {  // one packed int4-dot8 matrix (dot8.py `Packed`): tiles x 16 outputs, groups of inputs
  const uint8_t* w;
  const uint16_t* scales;
  int64_t tiles, groups, bits;
  float unscale;
};

// A Packed matrix's tensors, checked: w [N / 16, K / group, 256 or 192] uint8, scales [N / 16, K / group, 32] float16.
Dot8Part dot8_part(const at::Tensor& w, const at::Tensor& scales, int64_t bits, double unscale);

// y [M, ldy] (columns 0 .. 16 sum(tiles)) = x [M, K] W^T for the parts stacked along N; x read as `halves` int8
// halves per 32 inputs, once for all the parts; isa: 2 = AVX-512 VNNI, 1 = AVX2.
void dot8_linear(const float* x, int64_t M, int64_t K, const std::vector<Dot8Part>& parts, int64_t halves,
                 int64_t isa, float* y, int64_t ldy);

// out [hd] = softmax(q keys^T scale) values over keys 0 .. n - 1 ([n, hd] each, rows hd apart); weights: scratch.
void attend_row(const float* q, const float* keys, const float* values, int64_t n, int64_t hd, float scale, float* out,
                std::vector<float>& weights);

}  // namespace specdecode
