// How many 256-bit vpmaddubsw / vpmaddwd / vpaddw one core issues per nanosecond: 10 independent chains of each.
// Build and run (a twenty-fifth session): g++ -O2 -o /tmp/pipes docs/bench/avx2-verify-probes/pipes.cpp && /tmp/pipes
// and, to see whether the two vCPUs share a core's pipes: taskset -c 0 /tmp/pipes & taskset -c 1 /tmp/pipes
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#define STEP(OPX) a0 = OPX(a0); a1 = OPX(a1); a2 = OPX(a2); a3 = OPX(a3); a4 = OPX(a4); a5 = OPX(a5); a6 = OPX(a6); a7 = OPX(a7); a8 = OPX(a8); a9 = OPX(a9);
template <int OP>
__attribute__((target("avx2"))) double run(long n) {
  __m256i b = _mm256_set1_epi8(3), c = _mm256_set1_epi16(1);
  __m256i a0 = _mm256_set1_epi8(0), a1 = _mm256_set1_epi8(1), a2 = _mm256_set1_epi8(2), a3 = _mm256_set1_epi8(3),
          a4 = _mm256_set1_epi8(4), a5 = _mm256_set1_epi8(5), a6 = _mm256_set1_epi8(6), a7 = _mm256_set1_epi8(7),
          a8 = _mm256_set1_epi8(8), a9 = _mm256_set1_epi8(9);
#define MUB(x) _mm256_maddubs_epi16(x, b)
#define MWD(x) _mm256_madd_epi16(x, c)
#define ADD(x) _mm256_add_epi16(x, b)
#define MIX(x) _mm256_add_epi16(_mm256_maddubs_epi16(x, b), c)
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < n; ++k) {
    if (OP == 0) { STEP(MUB) }
    if (OP == 1) { STEP(MWD) }
    if (OP == 2) { STEP(ADD) }
    if (OP == 3) { STEP(MIX) }
    asm volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9));
  }
  auto t1 = std::chrono::steady_clock::now();
  __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)), _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(_mm256_add_epi32(a6, a7), _mm256_add_epi32(a8, a9))));
  if (_mm256_extract_epi32(s, 0) == 12345) printf("!");
  return std::chrono::duration<double>(t1 - t0).count() / (n * 10.0) * 1e9;
}
int main() {
  const long n = 100000000;
  for (int r = 0; r < 3; ++r)
    printf("ns per op: maddubs %.3f  madd %.3f  add16 %.3f  maddubs+add(pair) %.3f\n", run<0>(n), run<1>(n), run<2>(n), run<3>(n));
}
