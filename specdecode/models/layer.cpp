// A stack of Llama-family layers of the int4-dot8 format in one call per pass (dot8_layers): each the same layer as
// models/llama.py's `LlamaLayer` (whose `KernelStack` calls this for that format), without a Python step per layer,
// product, norm and rotation:
//
//   h   = x + o(attention(rope(qkv(rmsnorm(x)))))
//   out = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))
//
// x [T, D] float32 holds several sequences' new rows one after another (segments, as llama.py's `Segment`): each
// segment's keys and values go into its own cache at slots start .. start + count - 1, and its rows attend that
// cache (row r: slots 0 .. start + r). Every row goes through the same operations whatever T and the other
// segments are (dot8.cpp's products and attention.cpp's rows are batch invariant, the rest is per row), so a row is
// bitwise what the sequence's own pass gives it.
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels.h"

namespace {

struct Linear {  // one of the layer's matrices: its parts stacked along N
  std::vector<specdecode::Dot8Part> parts;
  int64_t out;
};

// The layer's four linears (qkv, o, gate_up, down) from weights [w, sub, sup per part, in order], parts per linear,
// bits and unscale per part.
std::vector<Linear> linears(at::TensorList weights, at::IntArrayRef parts, at::IntArrayRef bits,
                            at::ArrayRef<double> unscales) {
  TORCH_CHECK(parts.size() == 4, "dot8_layers: four linears a layer (qkv, o, gate_up, down)");
  std::vector<Linear> out;
  size_t next = 0;
  for (size_t i = 0; i < 4; ++i) {
    Linear linear{{}, 0};
    for (int64_t j = 0; j < parts[i]; ++j, ++next) {
      TORCH_CHECK(3 * next + 2 < weights.size() && next < bits.size() && next < unscales.size(),
                  "dot8_layers: fewer weights than parts");
      linear.parts.push_back(specdecode::dot8_part(weights[3 * next], weights[3 * next + 1], weights[3 * next + 2],
                                                   bits[next], unscales[next]));
      linear.out += 16 * linear.parts.back().tiles;
    }
    out.push_back(linear);
  }
  return out;
}

// y [T, N] = x [T, K] W^T for one of the layer's linears (each row's products are the same whatever the rows beside
// it: dot8.cpp).
void product(const float* x, int64_t T, int64_t K, const Linear& linear, int64_t isa, float* y, int64_t N) {
  specdecode::dot8_linear(x, T, K, linear.parts, isa, y, N);
}

// y [T, D] = weight * x / sqrt(mean(x^2) + eps), row by row.
void rmsnorm(const float* x, const float* weight, int64_t T, int64_t D, double eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* row = x + t * D;
    double squares = 0.0;  // (in float, a residual stream with outliers of ~4000 lost the small squares)
    for (int64_t i = 0; i < D; ++i) squares += static_cast<double>(row[i]) * row[i];
    const float inv = 1.f / std::sqrt(static_cast<float>(squares / static_cast<double>(D)) + static_cast<float>(eps));
    for (int64_t i = 0; i < D; ++i) y[t * D + i] = weight[i] * (row[i] * inv);
  }
}

// x [hd] rotated in place to its position (rotate-half: cos, sin [hd]).
void rope(float* x, const float* cos, const float* sin, int64_t hd) {
  const int64_t half = hd / 2;
  for (int64_t d = 0; d < half; ++d) {
    const float a = x[d], b = x[d + half];
    x[d] = a * cos[d] - b * sin[d];
    x[d + half] = b * cos[d + half] + a * sin[d + half];
  }
}

// out [n] = silu(g) u = g u / (1 + e^-g), lane by lane (e^-|g| by exp8, so each element's bits depend on its inputs
// alone).
__attribute__((target("avx2,fma"))) void silu_times(const float* g, const float* u, int64_t n, float* out) {
  const __m256 sign = _mm256_set1_ps(-0.f), one = _mm256_set1_ps(1.f);
  for (int64_t i = 0; i < n; i += 8) {
    alignas(32) float gs[8] = {}, us[8] = {}, os[8];
    const int64_t lanes = std::min<int64_t>(8, n - i);
    std::copy_n(g + i, lanes, gs);
    std::copy_n(u + i, lanes, us);
    const __m256 x = _mm256_load_ps(gs);
    const __m256 e = specdecode::exp8(_mm256_or_ps(x, sign));  // e^-|g|
    const __m256 numerator = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), x);  // g, or g e^g where g < 0 (sign set)
    _mm256_store_ps(os, _mm256_mul_ps(_mm256_div_ps(numerator, _mm256_add_ps(one, e)), _mm256_load_ps(us)));
    std::copy_n(os, lanes, out + i);
  }
}

// Whose and where each of a pass's T rows is: segment_of[t] (the segment holding row t) and position[t] (its slot in
// that segment's cache), from the segments' firsts, counts and starts; checked once a pass.
struct Rows {
  std::vector<int64_t> segment_of, position;
};

Rows rows_of(int64_t T, at::IntArrayRef firsts, at::IntArrayRef counts, at::IntArrayRef starts) {
  const size_t segments = firsts.size();
  TORCH_CHECK(counts.size() == segments && starts.size() == segments,
              "dot8_layers: one first, count and start per segment");
  Rows rows{std::vector<int64_t>(T, -1), std::vector<int64_t>(T)};
  for (size_t s = 0; s < segments; ++s) {
    TORCH_CHECK(firsts[s] >= 0 && counts[s] >= 1 && firsts[s] + counts[s] <= T && starts[s] >= 0,
                "dot8_layers: a segment outside the pass");
    for (int64_t r = 0; r < counts[s]; ++r) {
      TORCH_CHECK(rows.segment_of[firsts[s] + r] < 0, "dot8_layers: segments overlap");
      rows.segment_of[firsts[s] + r] = static_cast<int64_t>(s);
      rows.position[firsts[s] + r] = starts[s] + r;
    }
  }
  TORCH_CHECK(std::find(rows.segment_of.begin(), rows.segment_of.end(), -1) == rows.segment_of.end(),
              "dot8_layers: a row in no segment");
  return rows;
}

// One layer of x [T, D] (contiguous float32; cos, sin [T, hd] checked by the caller) -> [T, D]; each segment s's new
// keys and values into k_caches[s], v_caches[s] [KV, S, hd] at its rows' positions.
at::Tensor dot8_layer(const at::Tensor& x, const at::Tensor& attn_norm, const at::Tensor& mlp_norm, double eps,
                      at::TensorList weights, at::IntArrayRef parts, at::IntArrayRef bits,
                      at::ArrayRef<double> unscales, const c10::optional<at::Tensor>& qkv_bias,
                      int64_t heads, int64_t kv_heads, int64_t hd, const at::Tensor& cos, const at::Tensor& sin,
                      at::TensorList k_caches, at::TensorList v_caches, at::IntArrayRef counts,
                      at::IntArrayRef starts, const Rows& rows, int64_t isa) {
  const int64_t T = x.size(0), D = x.size(1), H = heads, KV = kv_heads, Q = (H + 2 * KV) * hd;
  TORCH_CHECK(attn_norm.numel() == D && mlp_norm.numel() == D && attn_norm.is_contiguous() &&
                  mlp_norm.is_contiguous() && attn_norm.scalar_type() == at::kFloat &&
                  mlp_norm.scalar_type() == at::kFloat, "norms: contiguous float32 [D]");
  const std::vector<Linear> lin = linears(weights, parts, bits, unscales);
  const Linear &qkv = lin[0], &o = lin[1], &gate_up = lin[2], &down = lin[3];
  TORCH_CHECK(qkv.out == Q && o.out == D && down.out == D && gate_up.out % 2 == 0, "dot8_layers: linear shapes");
  const int64_t I = gate_up.out / 2;
  for (size_t s = 0; s < counts.size(); ++s) {
    const at::Tensor &k = k_caches[s], &v = v_caches[s];
    TORCH_CHECK(k.dim() == 3 && k.size(0) == KV && k.size(2) == hd && k.is_contiguous() &&
                    k.scalar_type() == at::kFloat && v.sizes() == k.sizes() && v.is_contiguous() &&
                    v.scalar_type() == at::kFloat, "caches: contiguous float32 [KV, S, hd]");
    TORCH_CHECK(starts[s] + counts[s] <= k.size(1), "dot8_layers: a segment outside its cache");
  }
  const std::vector<int64_t> &segment_of = rows.segment_of, &position = rows.position;
  if (qkv_bias.has_value())
    TORCH_CHECK(qkv_bias->numel() == Q && qkv_bias->is_contiguous() && qkv_bias->scalar_type() == at::kFloat,
                "qkv_bias: contiguous float32 [(H + 2 KV) hd]");

  const float* xp = x.data_ptr<float>();
  std::vector<float> normed(T * D), projected(T * Q), attended(T * H * hd), mixed(T * std::max(D, 2 * I));
  auto out = at::empty_like(x);
  float* op = out.data_ptr<float>();

  // attention: q, k, v of every row; k, v into each segment's cache; each row over its own sequence's keys
  rmsnorm(xp, attn_norm.data_ptr<float>(), T, D, eps, normed.data());
  product(normed.data(), T, D, qkv, isa, projected.data(), Q);
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    float* row = projected.data() + t * Q;
    if (qkv_bias.has_value()) {
      const float* b = qkv_bias->data_ptr<float>();
      for (int64_t i = 0; i < Q; ++i) row[i] += b[i];
    }
    for (int64_t h = 0; h < H + KV; ++h) rope(row + h * hd, cp + t * hd, sp + t * hd, hd);
    const int64_t s = segment_of[t], S = k_caches[s].size(1);
    float* kc = k_caches[s].data_ptr<float>();
    float* vc = v_caches[s].data_ptr<float>();
    for (int64_t kv = 0; kv < KV; ++kv) {
      std::copy_n(row + (H + kv) * hd, hd, kc + (kv * S + position[t]) * hd);
      std::copy_n(row + (H + KV + kv) * hd, hd, vc + (kv * S + position[t]) * hd);
    }
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  at::parallel_for(0, T * H, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> scratch;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, s = segment_of[t], S = k_caches[s].size(1), kv = h / (H / KV);
      specdecode::attend_row(projected.data() + t * Q + h * hd, k_caches[s].data_ptr<float>() + kv * S * hd,
                             v_caches[s].data_ptr<float>() + kv * S * hd, position[t] + 1, hd, scale,
                             attended.data() + t * H * hd + h * hd, scratch);
    }
  });
  product(attended.data(), T, H * hd, o, isa, mixed.data(), D);
  for (int64_t i = 0; i < T * D; ++i) op[i] = xp[i] + mixed[i];  // h

  // MLP
  rmsnorm(op, mlp_norm.data_ptr<float>(), T, D, eps, normed.data());
  std::vector<float> gated(T * 2 * I), activated(T * I);
  product(normed.data(), T, D, gate_up, isa, gated.data(), 2 * I);
  at::parallel_for(0, T, std::max<int64_t>(1, 16384 / I), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) silu_times(gated.data() + t * 2 * I, gated.data() + t * 2 * I + I, I,
                                                 activated.data() + t * I);
  });
  product(activated.data(), T, I, down, isa, mixed.data(), D);
  for (int64_t i = 0; i < T * D; ++i) op[i] += mixed[i];
  return out;
}

// x [T, D] through L layers in turn, in one call per pass (llama.py `KernelStack`): per layer l, its norms, qkv bias
// (or none) and its four linears' parts (parts[4 l .. 4 l + 3], their weights, bits and unscales one layer after
// another), and its caches k_caches[l S .. l S + S - 1] for the S segments (v_caches alike) -> [T, D].
at::Tensor dot8_layers(const at::Tensor& x, at::TensorList attn_norms, at::TensorList mlp_norms, double eps,
                       at::TensorList weights, at::IntArrayRef parts, at::IntArrayRef bits,
                       at::ArrayRef<double> unscales, const c10::List<c10::optional<at::Tensor>>& qkv_biases,
                       int64_t heads, int64_t kv_heads, int64_t hd, const at::Tensor& cos, const at::Tensor& sin,
                       at::TensorList k_caches, at::TensorList v_caches, at::IntArrayRef firsts,
                       at::IntArrayRef counts, at::IntArrayRef starts, int64_t isa) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float32 [T, D]");
  const int64_t T = x.size(0);
  TORCH_CHECK(heads % kv_heads == 0 && hd % 8 == 0, "dot8_layers: head sizes");
  TORCH_CHECK(cos.sizes() == at::IntArrayRef({T, hd}) && sin.sizes() == cos.sizes() && cos.is_contiguous() &&
                  sin.is_contiguous() && cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat,
              "cos, sin: contiguous float32 [T, hd]");
  const size_t L = attn_norms.size(), S = firsts.size();
  TORCH_CHECK(mlp_norms.size() == L && qkv_biases.size() == L && parts.size() == 4 * L,
              "dot8_layers: norms, a qkv bias and four linears per layer");
  TORCH_CHECK(k_caches.size() == L * S && v_caches.size() == L * S, "dot8_layers: a cache per layer and segment");
  const Rows rows = rows_of(T, firsts, counts, starts);
  at::Tensor h = x;
  size_t part = 0;  // the first of layer l's parts
  for (size_t l = 0; l < L; ++l) {
    const at::IntArrayRef mine = parts.slice(4 * l, 4);
    size_t n = 0;
    for (const int64_t p : mine) n += static_cast<size_t>(p);
    TORCH_CHECK(3 * (part + n) <= weights.size() && part + n <= bits.size() && part + n <= unscales.size(),
                "dot8_layers: fewer weights than parts");
    h = dot8_layer(h, attn_norms[l], mlp_norms[l], eps, weights.slice(3 * part, 3 * n), mine, bits.slice(part, n),
                   unscales.slice(part, n), qkv_biases.get(l), heads, kv_heads, hd, cos, sin, k_caches.slice(l * S, S),
                   v_caches.slice(l * S, S), counts, starts, rows, isa);
    part += n;
  }
  return h;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(specdecode, m) {
  m.def("dot8_layers(Tensor x, Tensor[] attn_norms, Tensor[] mlp_norms, float eps, Tensor[] weights, int[] parts, "
        "int[] bits, float[] unscales, Tensor?[] qkv_biases, int heads, int kv_heads, int head_dim, Tensor cos, "
        "Tensor sin, Tensor(a!)[] k_caches, Tensor(b!)[] v_caches, int[] firsts, int[] counts, int[] starts, "
        "int isa) -> Tensor",
        &dot8_layers);
}
