// out [H, R, hd] = softmax(q k^T / sqrt(hd)) v, each query row r over the keys in cache slots 0..positions[r]
// (grouped-query: head h reads key / value head h / (H / KV)); float32, AVX2 + FMA. The native engine's attention
// for the int4-dot8 format (models/llama.py `KeyPositions`).
//
// Each (head, row) is computed from its own keys alone, in a fixed order: a row's output is bitwise the same whatever
// the pass size, the cache's length beyond its keys and the thread count, and on every CPU with AVX2 (an AVX-512
// machine runs the same instructions). torch's flash attention, by contrast, reduces in blocks whose size depends on
// the number of keys, which the engine could only hold still by attending whole blocks of 512 keys.
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <immintrin.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels.h"

namespace {

__attribute__((target("avx2,fma"))) inline float dot(const float* a, const float* b, int64_t hd) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc);
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

// q [H, R, hd], keys / values [KV, S, hd] (contiguous), positions [R] int64 (each < S) -> [H, R, hd].
at::Tensor attend(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  TORCH_CHECK(q.dim() == 3 && q.scalar_type() == at::kFloat && q.is_contiguous(), "q: contiguous float32 [H, R, hd]");
  TORCH_CHECK(keys.dim() == 3 && keys.scalar_type() == at::kFloat && keys.is_contiguous() &&
                  values.sizes() == keys.sizes() && values.scalar_type() == at::kFloat && values.is_contiguous(),
              "keys, values: contiguous float32 [KV, S, hd]");
  const int64_t H = q.size(0), R = q.size(1), hd = q.size(2), KV = keys.size(0), S = keys.size(1);
  TORCH_CHECK(keys.size(2) == hd && hd % 8 == 0 && H % KV == 0, "attend: head sizes do not match");
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == R && positions.scalar_type() == at::kLong,
              "positions: int64 [R]");
  const int64_t* pos = positions.data_ptr<int64_t>();
  for (int64_t r = 0; r < R; ++r) TORCH_CHECK(pos[r] >= 0 && pos[r] < S, "attend: a position outside the cache");
  auto out = at::empty_like(q);
  const float* qp = q.data_ptr<float>();
  const float* kp = keys.data_ptr<float>();
  const float* vp = values.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  at::parallel_for(0, H * R, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> weights;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t h = i / R, r = i % R, kv = h / (H / KV);
      specdecode::attend_row(qp + i * hd, kp + kv * S * hd, vp + kv * S * hd, pos[r] + 1, hd, scale, op + i * hd,
                             weights);
    }
  });
  return out;
}

}  // namespace

namespace specdecode {

__attribute__((target("avx2,fma")))
void attend_row(const float* q, const float* keys, const float* values, int64_t n, int64_t hd, float scale, float* out,
             std::vector<float>& weights) {
  weights.assign((n + 7) / 8 * 8, 0.f);
  float top = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    weights[j] = dot(q, keys + j * hd, hd) * scale;
    top = std::max(top, weights[j]);
  }
  for (int64_t j = 0; j < n; j += 8)  // e^(s - max), elementwise: a key's weight does not depend on its lane
    _mm256_storeu_ps(&weights[j], specdecode::exp8(_mm256_sub_ps(_mm256_loadu_ps(&weights[j]), _mm256_set1_ps(top))));
  float total = 0.f;
  for (int64_t j = 0; j < n; ++j) total += weights[j];
  for (int64_t d = 0; d < hd; d += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(weights[j]), _mm256_loadu_ps(values + j * hd + d), acc);
    _mm256_storeu_ps(out + d, _mm256_div_ps(acc, _mm256_set1_ps(total)));
  }
}

}  // namespace specdecode

TORCH_LIBRARY_FRAGMENT(specdecode, m) {
  m.def("attend(Tensor q, Tensor keys, Tensor values, Tensor positions) -> Tensor", &attend);
}
