// y [M, N] = x [M, K] W^T for 4-bit and 6-bit weights against activations rounded to int8 per 32 inputs, on
// AVX-512 VNNI or AVX2: the native engine's int4-dot8 products. models/dot8.py builds it, packs the
// weights and holds the reference in Python; the layout:
//
//   w      [N / 16, K / group, B] uint8   16 output rows (one 32-bit lane each) x one group of inputs:
//          bits 4, group 32, B = 256: 4 blocks of 64 bytes; block b, lane n, byte j
//                                     = code[n, 8b + j] | code[n, 8b + 4 + j] << 4
//          bits 6, group 16, B = 192: codes 0..63 as their low 4 bits in 2 blocks of 64 bytes (block b, lane n,
//                                     byte j = low[n, 8b + j] | low[n, 8b + 4 + j] << 4), then their high 2 bits in
//                                     one block (lane n, byte j = sum over c < 4 of high[n, 4c + j] << 2c)
//   sub    [N / 16, K / group, S]   the 16 rows' integer sub-scales: 4 bits, S = 32: sc (uint8), then m (int8);
//                                   6 bits, S = 16: sc (int8)
//   sup    [N / 16, K / 256, S] float16  per superblock of 256 inputs (the last one shorter): 4 bits: d, then dmin;
//                                   6 bits: d (GGUF's K-quant layout, scaled by the power of two unscale undoes)
//   w = code scale + offset, scale = d sc, offset = dmin m (4 bits) or -32 scale (6 bits): each exact in float32
//   y = unscale * sum over groups g of (scale_g sx_g sum_i code_i 256 q_i + offset_g sum_i x~_i)
//
// where x~ = 256 q sx is the reading of x (see quantize). Every row and every output is computed by the same
// operations whatever M, N and the thread count (integer dot products, exact, then one fixed float sequence per
// lane), and the AVX2 path performs the same float operations as the AVX-512 one: results are bitwise equal across
// pass sizes and between the two paths.
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <torch/library.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.h"

namespace {

constexpr int64_t TILE = 16;    // output rows per tile
constexpr int64_t XGROUP = 32;  // activation inputs sharing one int8 scale
constexpr int64_t CHUNK = 16;   // activation rows computed against a tile at a time
constexpr int64_t BLOCK4 = 256;  // bytes of 4-bit codes per tile and group (32 inputs)
constexpr int64_t BLOCK6 = 192;  // bytes of 6-bit codes per tile and group (16 inputs)
constexpr int64_t SUPER = 256;   // inputs per superblock (d and dmin)
constexpr int64_t AMX_ROWS = 16;  // fewer rows take the VNNI path on an AMX CPU (the same bits): whole 1.5B passes on
                                  // the AMX Xeon of 2026-12-05, two runs alternating: 8 rows 110-114 ms on the tiles,
                                  // 95-97 on VNNI; 16 rows 138-147 against 158; 32 rows 278-284 against 306-311
constexpr int64_t AHEAD = 8;  // groups ahead whose weights and scales a tile asks the memory for (software prefetch:
                              // without it a pass of 4 rows took 59 ms of the 1.5B, with it 47; 1 row 29 and 28)

struct Rows {  // the activations, quantized: x ~ 256 q scale
  const int8_t* q;      // [M, K]
  const float* scale;   // [M, K / 32]
  const float* sum16;   // [M, K / 16]  sum of x~ over each 16 inputs
  const float* sum32;   // [M, K / 32]
  int64_t K;
};

// 8 int32 lanes in -127..127 as 8 int8 at out (packs saturate nothing here; the permute undoes their lane order).
__attribute__((target("avx2"))) inline void store_int8(__m256i a, __m256i b, __m256i c, __m256i d, int8_t* out) {
  const __m256i words = _mm256_packs_epi32(a, b), more = _mm256_packs_epi32(c, d);
  const __m256i bytes = _mm256_packs_epi16(words, more);  // per 128-bit lane: a0-3 b0-3 c0-3 d0-3 | a4-7 ...
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The sum of 8 int32 lanes (exact).
__attribute__((target("avx2"))) inline int32_t lane_sum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}

// x [K] -> q [K] int8, scale per 32 inputs, sums per 16 and per 32 of the reading x~ = 256 q scale, where
// 256 scale = max |x| / 127 over each 32 inputs (q as llama.cpp's Q8_0 rounds them). AVX2 on every path: each step
// is one IEEE operation per lane (no fused multiply-add), so the result is dot8.py's `reference` reading; the
// integer sums are exact in any order.
__attribute__((target("avx2,fma")))
void quantize_row(const float* x, int64_t K, int8_t* q, float* scale, float* sum16, float* sum32) {
  const __m256 sign = _mm256_set1_ps(-0.f), limit = _mm256_set1_ps(127.f), low = _mm256_set1_ps(-127.f);
  for (int64_t g = 0; g < K / XGROUP; ++g) {
    __m256 v[4], top = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + g * XGROUP + 8 * i);
      top = _mm256_max_ps(top, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    const float s = amax / 127.f, inv = amax > 0.f ? 127.f / amax : 0.f;
    __m256i hi[4], reading[2];
    for (int i = 0; i < 4; ++i) {
      const __m256 u = _mm256_mul_ps(v[i], _mm256_set1_ps(inv));  // in units of s
      const __m256 h = _mm256_round_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      hi[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(h, low), limit));
    }
    for (int half = 0; half < 2; ++half)  // 256 hi over inputs 16 half .. 16 half + 15
      reading[half] = _mm256_add_epi32(_mm256_slli_epi32(hi[2 * half], 8), _mm256_slli_epi32(hi[2 * half + 1], 8));
    store_int8(hi[0], hi[1], hi[2], hi[3], q + g * XGROUP);
    const int32_t sums[2] = {lane_sum(reading[0]), lane_sum(reading[1])};
    const float s256 = s / 256.f;
    scale[g] = s256;
    sum16[2 * g] = s256 * static_cast<float>(sums[0]);
    sum16[2 * g + 1] = s256 * static_cast<float>(sums[1]);
    sum32[g] = s256 * static_cast<float>(sums[0] + sums[1]);
  }
}

// quantize_row for each row of x [M, K].
void quantize(const float* x, int64_t M, int64_t K, int8_t* q, float* scale, float* sum16, float* sum32) {
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / K);  // a few rows are quicker on one thread
  at::parallel_for(0, M, grain, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      quantize_row(x + m * K, K, q + m * K, scale + m * (K / 32), sum16 + m * (K / 16), sum32 + m * (K / 32));
  });
}

// Bytes of sub-scales per tile and group, groups per superblock.
template <int BITS>
constexpr int64_t sub_bytes() { return BITS == 4 ? 32 : 16; }
template <int BITS>
constexpr int64_t per_super() { return SUPER / (BITS == 4 ? 32 : 16); }

struct Tile {  // one tile's weights: 16 output rows
  const uint8_t* w;
  const uint8_t* sub;
  const uint16_t* sup;
};

// Asks the memory for the codes and scales of the group AHEAD groups after group g (both paths).
template <int BITS>
inline void prefetch_ahead(const Tile& t, int64_t g) {
  constexpr int64_t block = BITS == 4 ? BLOCK4 : BLOCK6, S = sub_bytes<BITS>();
  const uint8_t* wg = t.w + (g + AHEAD) * block;
  for (int64_t line = 0; line < block; line += 64) _mm_prefetch(reinterpret_cast<const char*>(wg + line), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(t.sub + (g + AHEAD) * S), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(t.sup + (g + AHEAD) / per_super<BITS>() * S), _MM_HINT_T0);
}

// A superblock's float16 d (and dmin, 4 bits) for the 8 output rows from lane `first`, as floats: read once per
// superblock by the AVX2 tile rather than once per group (the same values, so the same bits).
template <int BITS>
__attribute__((target("avx2,f16c"))) inline void supers_avx2(const Tile& t, int64_t g, int first, __m256& d,
                                                             __m256& dmin) {
  const uint16_t* s = t.sup + g / per_super<BITS>() * sub_bytes<BITS>() + first;
  d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  if constexpr (BITS == 4) dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16)));
}

// Group g's scale and offset for the 8 output rows from lane `first` (AVX2; AVX-512 takes 16 at once), as floats:
// the integer times its superblock's d or dmin (supers_avx2), an exact product, so every path gets the same bits.
template <int BITS>
__attribute__((target("avx2"))) inline void scales_avx2(const Tile& t, int64_t g, int first, __m256 d, __m256 dmin,
                                                       __m256& scale, __m256& offset) {
  const uint8_t* s = t.sub + g * sub_bytes<BITS>() + first;
  const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s));
  if constexpr (BITS == 4) {
    scale = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)), d);
    const __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 16));
    offset = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(m)), dmin);
  } else {
    scale = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d);
    offset = _mm256_mul_ps(scale, _mm256_set1_ps(-32.f));
  }
}

// A superblock's d (and dmin, 4 bits) for all 16 output rows, as floats (supers_avx2 on AVX-512).
template <int BITS>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) inline void supers_avx512(const Tile& t, int64_t g,
                                                                                     __m512& d, __m512& dmin) {
  const uint16_t* s = t.sup + g / per_super<BITS>() * sub_bytes<BITS>();
  d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  if constexpr (BITS == 4) dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16)));
}

// scales_avx2 for all 16 output rows, from their superblock's d and dmin (supers_avx512).
template <int BITS>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void scales_avx512(const Tile& t, int64_t g, __m512 d,
                                                                               __m512 dmin, __m512& scale,
                                                                               __m512& offset) {
  const uint8_t* s = t.sub + g * sub_bytes<BITS>();
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  if constexpr (BITS == 4) {
    scale = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)), d);
    const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    offset = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(m)), dmin);
  } else {
    scale = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), d);
    offset = _mm512_mul_ps(scale, _mm512_set1_ps(-32.f));
  }
}

inline int32_t word(const int8_t* p) {  // four int8 activations as one 32-bit word
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// acc + one group's 16 exact dots, scaled: the float steps every AVX-512 path (VNNI and AMX) takes, so they agree
// bitwise: acc + (dot xs) scale, then + offset xsum.
__attribute__((target("avx512f"))) inline __m512 add_group(__m512 acc, __m512i dot, float xs, float xsum,
                                                           __m512 scale, __m512 offset) {
  const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(xs));
  acc = _mm512_fmadd_ps(t, scale, acc);
  return _mm512_fmadd_ps(offset, _mm512_set1_ps(xsum), acc);
}

template <int BITS, int ROWS = 0>  // ROWS: a row count known when compiled (0: m1 - m0)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
void tile_avx512(const Tile& t, const Rows& x, int64_t m0, int64_t m1, int64_t groups, float* y, int64_t ldy,
                 float unscale) {
  constexpr int64_t GROUP = BITS == 4 ? 32 : 16;
  constexpr int CODES = BITS == 4 ? 8 : 4;
  __m512 acc[CHUNK];
  const int64_t rows = ROWS > 0 ? ROWS : m1 - m0;
  for (int64_t r = 0; r < rows; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i top = _mm512_set1_epi8(0x30);
  __m512 d = _mm512_setzero_ps(), dmin = d;  // (dmin: 4 bits only)
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* wg = t.w + g * (BITS == 4 ? BLOCK4 : BLOCK6);
    prefetch_ahead<BITS>(t, g);
    if (g % per_super<BITS>() == 0) supers_avx512<BITS>(t, g, d, dmin);
    __m512 scale, offset;
    scales_avx512<BITS>(t, g, d, dmin, scale, offset);
    __m512i codes[CODES];
    for (int b = 0; b < CODES / 2; ++b) {  // low 4 bits (all of a 4-bit code)
      const __m512i v = _mm512_loadu_si512(wg + 64 * b);
      codes[2 * b] = _mm512_and_si512(v, low);
      codes[2 * b + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
    if constexpr (BITS == 6) {  // high 2 bits, to bits 4-5
      const __m512i high = _mm512_loadu_si512(wg + 128);
      codes[0] = _mm512_or_si512(codes[0], _mm512_and_si512(_mm512_slli_epi16(high, 4), top));
      codes[1] = _mm512_or_si512(codes[1], _mm512_and_si512(_mm512_slli_epi16(high, 2), top));
      codes[2] = _mm512_or_si512(codes[2], _mm512_and_si512(high, top));
      codes[3] = _mm512_or_si512(codes[3], _mm512_and_si512(_mm512_srli_epi16(high, 2), top));
    }
    const int64_t k0 = g * GROUP;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t m = m0 + r;
      const int8_t* q = x.q + m * x.K + k0;
      // Two chains of dpbusd (even and odd words), so one row does not wait on each product's latency; integer
      // sums, exact in any order.
      __m512i dot[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      for (int c = 0; c < CODES; ++c)
        dot[c % 2] = _mm512_dpbusd_epi32(dot[c % 2], codes[c], _mm512_set1_epi32(word(q + 4 * c)));
      const __m512i sum = _mm512_slli_epi32(_mm512_add_epi32(dot[0], dot[1]), 8);  // 256 q's dots
      const float xs = x.scale[m * (x.K / 32) + k0 / 32];
      const float xsum = BITS == 4 ? x.sum32[m * (x.K / 32) + g] : x.sum16[m * (x.K / 16) + g];
      acc[r] = add_group(acc[r], sum, xs, xsum, scale, offset);
    }
  }
  for (int64_t r = 0; r < rows; ++r) _mm512_storeu_ps(y + (m0 + r) * ldy, _mm512_mul_ps(acc[r], _mm512_set1_ps(unscale)));
}

// One row's exact dots with one group's codes for 8 lanes, on AVX2: maddubs' pair sums (codes 0..63 times int8
// -127..127: at most 16002) summed in int16 while they cannot overflow (4-bit codes: all 8 pairs of words, at most
// 30480; 6-bit: 2), then widened by one madd per sum: the integers VNNI's dpbusd gives, for fewer instructions.
template <int BITS>
__attribute__((target("avx2"))) inline __m256i dots_avx2(const __m256i* codes, const int8_t* x) {
  constexpr int CODES = BITS == 4 ? 8 : 4, SUMMED = BITS == 4 ? 8 : 2;  // words per int16 sum
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i dot = _mm256_setzero_si256();
  for (int c0 = 0; c0 < CODES; c0 += SUMMED) {
    __m256i pairs = _mm256_maddubs_epi16(codes[c0], _mm256_set1_epi32(word(x + 4 * c0)));
    for (int c = c0 + 1; c < c0 + SUMMED; ++c)
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(codes[c], _mm256_set1_epi32(word(x + 4 * c))));
    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
  }
  return dot;
}

template <int BITS, int ROWS = 0>  // ROWS: a row count known when compiled (0: m1 - m0)
__attribute__((target("avx2,f16c,fma")))
void tile_avx2(const Tile& t, const Rows& x, int64_t m0, int64_t m1, int64_t groups, float* y, int64_t ldy,
               float unscale) {
  constexpr int64_t GROUP = BITS == 4 ? 32 : 16;
  constexpr int CODES = BITS == 4 ? 8 : 4;
  __m256 acc[CHUNK][2];
  __m256i dots[2][CHUNK];
  const int64_t rows = ROWS > 0 ? ROWS : m1 - m0;
  for (int64_t r = 0; r < rows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  __m256 d[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, dmin[2] = {d[0], d[1]};  // (dmin: 4 bits only)
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* wg = t.w + g * (BITS == 4 ? BLOCK4 : BLOCK6);
    prefetch_ahead<BITS>(t, g);
    const int64_t k0 = g * GROUP;
    if (g % per_super<BITS>() == 0)
      for (int h = 0; h < 2; ++h) supers_avx2<BITS>(t, g, 8 * h, d[h], dmin[h]);
    __m256 scale[2], offset[2];
    for (int h = 0; h < 2; ++h) {  // lanes 8h .. 8h + 7: the integer dots of every row
      scales_avx2<BITS>(t, g, 8 * h, d[h], dmin[h], scale[h], offset[h]);
      __m256i codes[CODES];
      for (int b = 0; b < CODES / 2; ++b) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + 64 * b + 32 * h));
        codes[2 * b] = _mm256_and_si256(v, low);
        codes[2 * b + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      }
      if constexpr (BITS == 6) {
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + 128 + 32 * h));
        codes[0] = _mm256_or_si256(codes[0], _mm256_and_si256(_mm256_slli_epi16(high, 4), top));
        codes[1] = _mm256_or_si256(codes[1], _mm256_and_si256(_mm256_slli_epi16(high, 2), top));
        codes[2] = _mm256_or_si256(codes[2], _mm256_and_si256(high, top));
        codes[3] = _mm256_or_si256(codes[3], _mm256_and_si256(_mm256_srli_epi16(high, 2), top));
      }
      for (int64_t r = 0; r < rows; ++r) dots[h][r] = dots_avx2<BITS>(codes, x.q + (m0 + r) * x.K + k0);
    }
    for (int64_t r = 0; r < rows; ++r) {  // then add_group's float steps
      const int64_t m = m0 + r;
      // float(dot << 8) xs (as AVX-512) computed as float(dot) (256 xs): the same product (powers of two scale exactly)
      const float xs = x.scale[m * (x.K / 32) + k0 / 32] * 256.f;
      const float xsum = BITS == 4 ? x.sum32[m * (x.K / 32) + g] : x.sum16[m * (x.K / 16) + g];
      for (int h = 0; h < 2; ++h) {
        const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(dots[h][r]), _mm256_set1_ps(xs));
        acc[r][h] = _mm256_fmadd_ps(p, scale[h], acc[r][h]);
        acc[r][h] = _mm256_fmadd_ps(offset[h], _mm256_set1_ps(xsum), acc[r][h]);
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < 2; ++h)
      _mm256_storeu_ps(y + (m0 + r) * ldy + 8 * h, _mm256_mul_ps(acc[r][h], _mm256_set1_ps(unscale)));
}

// 4-bit codes on AVX-512 with AMX-INT8 tiles doing the integer dot products: a group's codes as tile B ([8, 64]: row
// c, lane n, byte j = code[n, 4c + j], as tile_avx512's codes[] registers hold them), the rows' int8 activations as
// tile A ([rows, 32] bytes, K apart), dpbsud into a [rows, 16] int32 tile. The dots are exact integers, as
// VNNI's, and the float steps after them the same instructions: bitwise equal to tile_avx512. A group costs the tiles
// ~50 cycles whatever the rows, so they pay from AMX_ROWS rows on (6-bit codes, twice the groups, never did; 8 rows on
// the tiles cost 1.15x the VNNI path in whole passes on the Xeon of 2026-12-05).
// Software-pipelined: the tiles compute one group's dots while the vector units scale the group before.
struct TileConfig {  // ldtilecfg's 64-byte operand, palette 1
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct AmxDots {  // one group's dots, [rows, 16]
  alignas(64) uint8_t codes[8 * 64];
  alignas(64) int32_t dots[CHUNK * 16];

  // Stage P's tiles: activations P, codes 2 + 3P, dots 3 + 3P. Two stages in different tiles let one group's
  // products start before the other's are stored.
  template <int P>
  __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-int8")))
  void compute(const uint8_t* wg, const Rows& x, int64_t m0, int64_t k0) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int b = 0; b < 4; ++b) {
      const __m512i v = _mm512_loadu_si512(wg + 64 * b);
      _mm512_store_si512(codes + 128 * b, _mm512_and_si512(v, low));
      _mm512_store_si512(codes + 128 * b + 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
    const int8_t* q = x.q + m0 * x.K + k0;
#define SPECDECODE_TILE_DOTS(A, B, C) \
  _tile_loadd(B, codes, 64);          \
  _tile_loadd(A, q, x.K);             \
  _tile_zero(C);                      \
  _tile_dpbsud(C, A, B);              \
  _tile_stored(C, dots, 64);
    if constexpr (P == 0) {  // the intrinsics take tile numbers as literals
      SPECDECODE_TILE_DOTS(0, 2, 3)
    } else {
      SPECDECODE_TILE_DOTS(1, 5, 6)
    }
#undef SPECDECODE_TILE_DOTS
  }
};

// acc [rows] += group g's dots, scaled (add_group, as tile_avx512).
__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))
inline void scale_group(const AmxDots& done, int64_t g, const Tile& t, const Rows& x, int64_t m0,
                        int64_t rows, __m512* acc) {
  __m512 d, dmin, scale, offset;
  supers_avx512<4>(t, g, d, dmin);
  scales_avx512<4>(t, g, d, dmin, scale, offset);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = m0 + r;
    const __m512i dot = _mm512_slli_epi32(_mm512_load_si512(done.dots + 16 * r), 8);  // 256 q's dots
    const float xs = x.scale[m * (x.K / 32) + g];
    const float xsum = x.sum32[m * (x.K / 32) + g];
    acc[r] = add_group(acc[r], dot, xs, xsum, scale, offset);
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma,amx-tile,amx-int8")))
void tile_amx(const Tile& t, const Rows& x, int64_t m0, int64_t m1, int64_t groups, float* y, int64_t ldy,
              float unscale) {
  const int64_t rows = m1 - m0;
  TileConfig config;  // see AmxDots::compute
  for (int t : {0, 1, 3, 6}) {
    config.rows[t] = static_cast<uint8_t>(rows);
    config.colsb[t] = t < 2 ? 32 : 64;
  }
  config.rows[2] = config.rows[5] = 8;
  config.colsb[2] = config.colsb[5] = 64;
  _tile_loadconfig(&config);  // per call: other code (oneDNN) may load its own in this thread
  AmxDots stage[2];
  __m512 acc[CHUNK];
  for (int64_t r = 0; r < rows; ++r) acc[r] = _mm512_setzero_ps();
  stage[0].compute<0>(t.w, x, m0, 0);
  for (int64_t g = 0; g < groups; g += 2) {  // the tiles one group ahead of the vector units
    prefetch_ahead<4>(t, g);
    if (g + 1 < groups) stage[1].compute<1>(t.w + (g + 1) * BLOCK4, x, m0, (g + 1) * 32);
    scale_group(stage[0], g, t, x, m0, rows, acc);
    if (g + 1 < groups) {
      prefetch_ahead<4>(t, g + 1);
      if (g + 2 < groups) stage[0].compute<0>(t.w + (g + 2) * BLOCK4, x, m0, (g + 2) * 32);
      scale_group(stage[1], g + 1, t, x, m0, rows, acc);
    }
  }
  _tile_release();
  for (int64_t r = 0; r < rows; ++r) _mm512_storeu_ps(y + (m0 + r) * ldy, _mm512_mul_ps(acc[r], _mm512_set1_ps(unscale)));
}

// Linux's leave for this process to use AMX's tile data (cpu.py asks for it first; asking again is harmless): without
// it the first tile instruction dies of SIGILL.
bool tile_state_granted() {
  static const bool granted = [] {
    constexpr long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  }();
  return granted;
}

using TileFn = void (*)(const Tile&, const Rows&, int64_t, int64_t, int64_t, float*, int64_t, float);

template <int ROWS>  // the tiles' ROWS
TileFn avx2_for(int64_t bits) { return bits == 4 ? tile_avx2<4, ROWS> : tile_avx2<6, ROWS>; }

template <int ROWS>
TileFn avx512_for(int64_t bits) { return bits == 4 ? tile_avx512<4, ROWS> : tile_avx512<6, ROWS>; }

// One or two rows (a draft's token, plain decoding, a verify of one draft) run tiles compiled for their count: the
// accumulators stay in registers (on AVX2 1 row ~20% and 2 rows ~8% quicker; 4 rows compiled for their count took
// ~10-17% longer, so from 4 rows on the general loop). On AVX2, 3 rows (a verify of two drafts) too: the 127
// products of a pass of the 1.5B took 4-27% less time so on a Zen 3 EPYC (three runs of products_ab.py, where the
// same code at 8 and 16 rows moved by -9% to +1%: docs/bench/avx2-verify-probes).
TileFn pick(int64_t isa, int64_t bits, int64_t rows) {
  if (isa == 3 && bits == 4 && rows >= AMX_ROWS) return tile_amx;
  if (isa >= 2) return rows == 1 ? avx512_for<1>(bits) : rows == 2 ? avx512_for<2>(bits) : avx512_for<0>(bits);
  return rows == 1 ? avx2_for<1>(bits) : rows == 2 ? avx2_for<2>(bits) : rows == 3 ? avx2_for<3>(bits)
                                                                        : avx2_for<0>(bits);
}

// isa: 3 = AMX-INT8 beside AVX-512 VNNI, 2 = AVX-512 VNNI, 1 = AVX2 (the caller checks what the CPU has).
at::Tensor dot8_mm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& sub, const at::Tensor& sup, int64_t bits,
                   double unscale, int64_t isa) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float32 [M, K]");
  const specdecode::Dot8Part part = specdecode::dot8_part(w, sub, sup, bits, unscale);
  TORCH_CHECK(x.size(1) == part.groups * (bits == 4 ? 32 : 16), "x's K does not match w");
  auto y = at::empty({x.size(0), part.tiles * TILE}, x.options());
  specdecode::dot8_linear(x.data_ptr<float>(), x.size(0), x.size(1), {part}, isa, y.data_ptr<float>(), y.size(1));
  return y;
}

}  // namespace

namespace specdecode {

Dot8Part dot8_part(const at::Tensor& w, const at::Tensor& sub, const at::Tensor& sup, int64_t bits, double unscale) {
  TORCH_CHECK(bits == 4 || bits == 6, "bits: 4 or 6");
  TORCH_CHECK(w.dim() == 3 && w.scalar_type() == at::kByte && w.is_contiguous() &&
                  w.size(2) == (bits == 4 ? BLOCK4 : BLOCK6),
              "w: contiguous uint8 [N / 16, K / group, 256 (4 bits) or 192 (6 bits)]");
  const int64_t S = bits == 4 ? 32 : 16, per = SUPER / (bits == 4 ? 32 : 16);
  TORCH_CHECK(sub.dim() == 3 && sub.scalar_type() == at::kByte && sub.is_contiguous() && sub.size(0) == w.size(0) &&
                  sub.size(1) == w.size(1) && sub.size(2) == S,
              "sub: contiguous uint8 [N / 16, K / group, 32 (4 bits) or 16 (6 bits)]");
  TORCH_CHECK(sup.dim() == 3 && sup.scalar_type() == at::kHalf && sup.is_contiguous() && sup.size(0) == w.size(0) &&
                  sup.size(1) == (w.size(1) + per - 1) / per && sup.size(2) == S,
              "sup: contiguous float16 [N / 16, superblocks, 32 (4 bits) or 16 (6 bits)]");
  return {w.data_ptr<uint8_t>(), sub.data_ptr<uint8_t>(), reinterpret_cast<const uint16_t*>(sup.data_ptr<at::Half>()),
          w.size(0), w.size(1), bits, static_cast<float>(unscale)};
}

void dot8_linear(const float* x, int64_t M, int64_t K, const std::vector<Dot8Part>& parts, int64_t isa, float* y,
                 int64_t ldy) {
  TORCH_CHECK(isa >= 1 && isa <= 3, "isa: 1 (AVX2), 2 (AVX-512 VNNI) or 3 (AMX-INT8)");
  TORCH_CHECK(isa != 3 || tile_state_granted(), "AMX: Linux did not grant this process the tile state");
  TORCH_CHECK(K % XGROUP == 0, "K: a multiple of 32");
  for (const Dot8Part& part : parts)
    TORCH_CHECK(K == part.groups * (part.bits == 4 ? 32 : 16), "x's K does not match w");
  std::vector<int8_t> q(M * K);
  std::vector<float> aux(M * (K / 32 + K / 16 + K / 32));
  float* a = aux.data();
  quantize(x, M, K, q.data(), a, a + M * (K / 32), a + M * (K / 32 + K / 16));
  const Rows rows{q.data(), a, a + M * (K / 32), a + M * (K / 32 + K / 16), K};
  std::vector<int64_t> first{0};  // each part's first tile among all the parts'
  for (const Dot8Part& part : parts) first.push_back(first.back() + part.tiles);
  at::parallel_for(0, first.back(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1, local = t - first[i];
      const Dot8Part& part = parts[i];
      const int64_t block = part.bits == 4 ? BLOCK4 : BLOCK6, S = part.bits == 4 ? 32 : 16;
      const int64_t per = SUPER / (part.bits == 4 ? 32 : 16), supers = (part.groups + per - 1) / per;
      const Tile tile{part.w + local * part.groups * block, part.sub + local * part.groups * S,
                      part.sup + local * supers * S};
      for (int64_t m0 = 0; m0 < M; m0 += CHUNK)
        pick(isa, part.bits, std::min(M, m0 + CHUNK) - m0)(tile, rows, m0, std::min(M, m0 + CHUNK), part.groups,
                                                           y + TILE * t, ldy, part.unscale);
    }
  });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(specdecode, m) {
  m.def("dot8_mm(Tensor x, Tensor w, Tensor sub, Tensor sup, int bits, float unscale, int isa) -> Tensor",
        &dot8_mm);
}
