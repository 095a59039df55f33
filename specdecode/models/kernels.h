// What our C++ kernels share (dot8.cpp, attention.cpp, layer.cpp; built into one library by kernels.py).
#pragma once

#include <ATen/core/Tensor.h>
#include <immintrin.h>

#include <cstdint>
#include <vector>

namespace specdecode {

struct Dot8Part {  // one packed int4-dot8 matrix (dot8.py `Packed`): tiles x 16 outputs, groups of inputs
  const uint8_t* w;
  const uint8_t* sub;
  const uint16_t* sup;
  int64_t tiles, groups, bits;
  float unscale;
};

// A Packed matrix's tensors, checked: w [N / 16, K / group, 256 or 192] uint8, sub [N / 16, K / group, 32 or 16]
// uint8, sup [N / 16, superblocks, 32 or 16] float16.
Dot8Part dot8_part(const at::Tensor& w, const at::Tensor& sub, const at::Tensor& sup, int64_t bits, double unscale);

// y [M, ldy] (columns 0 .. 16 sum(tiles)) = x [M, K] W^T for the parts stacked along N; x rounded to int8 per 32
// inputs once for all the parts; isa: 3 = AMX-INT8 beside AVX-512 VNNI, 2 = AVX-512 VNNI, 1 = AVX2.
void dot8_linear(const float* x, int64_t M, int64_t K, const std::vector<Dot8Part>& parts, int64_t isa, float* y,
                 int64_t ldy);

// out [hd] = softmax(q keys^T scale) values over keys 0 .. n - 1 ([n, hd] each, rows hd apart); weights: scratch.
void attend_row(const float* q, const float* keys, const float* values, int64_t n, int64_t hd, float scale, float* out,
                std::vector<float>& weights);

// e^x for x <= 0, 8 lanes (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-7 polynomial in r, times 2^n); AVX2
// code on every path, so a lane's result depends on its input alone.
__attribute__((target("avx2,fma"))) inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

}  // namespace specdecode
