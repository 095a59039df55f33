#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
// What one row-half of the AVX2 tile (8 output rows x 32 inputs: dots_avx2 and add_group's float steps) costs on
// its own, the codes in registers, 4 rows interleaved, activations from L1. Cycles at 2.95 GHz. Build and run:
//   g++ -O3 -mavx2 -mfma -std=c++17 fp_pipes.cpp -o /tmp/fp_pipes && /tmp/fp_pipes
// MODE 0: 8 broadcasts, 8 vpmaddubsw, 8 vpaddw (the integer dots before widening)
//      6: + vpmaddwd and an integer add (the dots widened, summed in int32)
//      5: + vpmaddwd, vcvtdq2ps, vmulps by the activations' scale, a float add
//      4: + vpmaddwd, vcvtdq2ps, the two fused multiply-adds (no vmulps)
//      2: + vpmaddwd, vcvtdq2ps, vmulps, two fused multiply-adds: the tile's own steps
template <int MODE>
__attribute__((noinline)) float run(const int8_t* x, const uint8_t* w, long iters) {
  __m256i codes[8];
  for (int c = 0; c < 8; ++c) codes[c] = _mm256_loadu_si256((const __m256i*)(w + 32 * c));
  __m256i acc[4]; __m256 facc[4];
  for (int r = 0; r < 4; ++r) { acc[r] = _mm256_setzero_si256(); facc[r] = _mm256_setzero_ps(); }
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256 sc = _mm256_set1_ps(1.0001f), of = _mm256_set1_ps(0.5f);
  for (long i = 0; i < iters; ++i) {
    const int8_t* xp = x + ((i * 128) & 4095);
    for (int r = 0; r < 4; ++r) {
      __m256i pairs;
      for (int c = 0; c < 8; ++c) {
        __m256i xv = _mm256_set1_epi32(*(const int*)(xp + 32 * r + 4 * c));
        __m256i p = _mm256_maddubs_epi16(codes[c], xv);
        pairs = c == 0 ? p : _mm256_add_epi16(pairs, p);
        asm("" : "+x"(pairs));
      }
      if (MODE >= 2) {
        __m256i dd = _mm256_madd_epi16(pairs, ones);
        __m256 f = _mm256_cvtepi32_ps(dd);
        if (MODE != 4) f = _mm256_mul_ps(f, _mm256_set1_ps(*(const float*)(xp + 32 * r)));
        if (MODE == 5) facc[r] = _mm256_add_ps(f, facc[r]);
        else if (MODE == 6) acc[r] = _mm256_add_epi32(acc[r], dd);
        else {
        facc[r] = _mm256_fmadd_ps(f, sc, facc[r]);
        facc[r] = _mm256_fmadd_ps(of, _mm256_set1_ps(*(const float*)(xp + 32 * r + 4)), facc[r]); }
      } else acc[r] = _mm256_add_epi16(acc[r], pairs);
    }
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(facc[0], facc[1]), _mm256_add_ps(facc[2], facc[3]));
  __m256i t = _mm256_add_epi16(_mm256_add_epi16(acc[0], acc[1]), _mm256_add_epi16(acc[2], acc[3]));
  float o[8]; _mm256_storeu_ps(o, _mm256_add_ps(s, _mm256_castsi256_ps(t))); return o[0];
}
template <int M> void t(const int8_t* x, const uint8_t* w) {
  long iters = 10000000; double best = 1e9; float s = 0;
  for (int k = 0; k < 5; ++k) { auto t0 = std::chrono::steady_clock::now(); s += run<M>(x, w, iters);
    best = std::min(best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / (iters * 4.0)); }
  printf("mode %d: %.2f cycles per row-half  %g\n", M, best * 2.95, s);
}
int main() { alignas(64) static int8_t x[8192]; for (int i = 0; i < 8192; ++i) x[i] = i * 7 % 100; alignas(64) static uint8_t w[256];
  for (int i = 0; i < 256; ++i) w[i] = i * 13 & 15; for (int round = 0; round < 2; ++round) { t<0>(x, w); t<6>(x, w); t<5>(x, w); t<4>(x, w); t<2>(x, w); } }
