// CPU kernels for the multi-stream rules (HC, mHC, MGR), the AttnRes family's weighted sum over depth and Review's
// gate norms: per-token contractions over n streams of d channels, the inverse RMS, and Sinkhorn's normalisations.
// Each loops over tokens and does all of one token's work while its n × d values are in cache. In ATen the same
// work is several passes over the streams: linalg.vecdot materialises the product before summing, and bmm makes one
// small matrix product per token.
//
// Every function takes contiguous tensors, flattened by the caller to (tokens, ...), in float32 or float64,
// and computes the same formula as the PyTorch path in rrlib/rules/ (tests/test_native.py and
// tests/test_review_gate.py compare them, forward and backward, in float64).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

constexpr int64_t kGrain = 16;  // tokens per parallel_for task
constexpr int64_t kMaxStreams = 64;  // write_backward_token keeps a column of M on the stack

void check(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

// Σ_c a[c] b[c], vectorised: the reduction may be reordered (as ATen's own sums are), which plain C++ forbids
template <typename scalar_t>
scalar_t dot(const scalar_t* a, const scalar_t* b, int64_t d) {
  scalar_t total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t c = 0; c < d; ++c) total += a[c] * b[c];
  return total;
}

// Σ_c g[c] (a[c] − b[c]), vectorised as dot() is
template <typename scalar_t>
scalar_t dot_difference(const scalar_t* g, const scalar_t* a, const scalar_t* b, int64_t d) {
  scalar_t total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t c = 0; c < d; ++c) total += g[c] * (a[c] - b[c]);
  return total;
}

// y = x + beta · (u − x) over d channels; returns Σ_c y[c]² (for y's norm, in the same pass)
template <typename scalar_t>
scalar_t lerp(scalar_t* y, const scalar_t* x, scalar_t beta, const scalar_t* u, int64_t d) {
  scalar_t squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t c = 0; c < d; ++c) {
    y[c] = x[c] + beta * (u[c] - x[c]);
    squares += y[c] * y[c];
  }
  return squares;
}

// y += alpha · x over d channels
template <typename scalar_t>
void axpy(scalar_t* y, scalar_t alpha, const scalar_t* x, int64_t d) {
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) y[c] += alpha * x[c];
}

// y = alpha · x over d channels
template <typename scalar_t>
void scale(scalar_t* y, scalar_t alpha, const scalar_t* x, int64_t d) {
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) y[c] = alpha * x[c];
}

// y = a1 · x1 + a2 · x2 over d channels
template <typename scalar_t>
void combine(scalar_t* y, scalar_t a1, const scalar_t* x1, scalar_t a2, const scalar_t* x2, int64_t d) {
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) y[c] = a1 * x1[c] + a2 * x2[c];
}

// y = x + a1 · x1 + a2 · x2 over d channels
template <typename scalar_t>
void combine_into(scalar_t* y, const scalar_t* x, scalar_t a1, const scalar_t* x1, scalar_t a2, const scalar_t* x2,
                  int64_t d) {
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) y[c] = x[c] + a1 * x1[c] + a2 * x2[c];
}

// p[c] = <x, W_c> for the k rows of W (k × len), four rows per pass over x: x is loaded once for four
// independent sums, where one dot() per row made a pass and a horizontal sum each (2× slower at n = 4)
template <typename scalar_t>
void dots(const scalar_t* x, const scalar_t* w, scalar_t* p, int64_t k, int64_t len, int64_t stride = 0) {
  if (stride == 0) stride = len;  // W's rows `stride` apart: MGR's streams are (k, N, d)
  int64_t c = 0;
  for (; c + 4 <= k; c += 4) {
    const scalar_t *w0 = w + c * stride, *w1 = w0 + stride, *w2 = w1 + stride, *w3 = w2 + stride;
    scalar_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
    for (int64_t e = 0; e < len; ++e) {
      a0 += x[e] * w0[e];
      a1 += x[e] * w1[e];
      a2 += x[e] * w2[e];
      a3 += x[e] * w3[e];
    }
    p[c] = a0, p[c + 1] = a1, p[c + 2] = a2, p[c + 3] = a3;
  }
  if (c + 2 <= k) {  // a remainder of two or three rows: two sums in one pass
    const scalar_t *w0 = w + c * stride, *w1 = w0 + stride;
    scalar_t a0 = 0, a1 = 0;
#pragma omp simd reduction(+ : a0, a1)
    for (int64_t e = 0; e < len; ++e) {
      a0 += x[e] * w0[e];
      a1 += x[e] * w1[e];
    }
    p[c] = a0, p[c + 1] = a1;
    c += 2;
  }
  for (; c < k; ++c) p[c] = dot(x, w + c * stride, len);
}

// dots() of two vectors x0 and x1 against the same k rows of W (k × len): each row is loaded once for both, and
// eight sums run side by side where dots() had four, so that the multiply-adds are not waiting on each other's
// results. Each sum is the loop dots() vectorises, in the same form, so the compiler reduces it the same way: the
// numbers of two dots() (checked to the bit with GCC 12, built for the AVX-512 Xeon, haswell and znver3).
template <typename scalar_t>
void dots2(const scalar_t* x0, const scalar_t* x1, const scalar_t* w, scalar_t* p0, scalar_t* p1, int64_t k,
           int64_t len) {
  int64_t c = 0;
  for (; c + 4 <= k; c += 4) {
    const scalar_t *w0 = w + c * len, *w1 = w0 + len, *w2 = w1 + len, *w3 = w2 + len;
    scalar_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
    for (int64_t e = 0; e < len; ++e) {
      a0 += x0[e] * w0[e];
      a1 += x0[e] * w1[e];
      a2 += x0[e] * w2[e];
      a3 += x0[e] * w3[e];
      b0 += x1[e] * w0[e];
      b1 += x1[e] * w1[e];
      b2 += x1[e] * w2[e];
      b3 += x1[e] * w3[e];
    }
    p0[c] = a0, p0[c + 1] = a1, p0[c + 2] = a2, p0[c + 3] = a3;
    p1[c] = b0, p1[c + 1] = b1, p1[c + 2] = b2, p1[c + 3] = b3;
  }
  if (c < k) {  // fewer than four rows left: dots() as it would take them
    dots(x0, w + c * len, p0 + c, k - c, len);
    dots(x1, w + c * len, p1 + c, k - c, len);
  }
}

// y += Σ_c alpha[c] W_c over the k rows of W, four rows per pass over y
template <typename scalar_t>
void add_rows(scalar_t* y, const scalar_t* alpha, const scalar_t* w, int64_t k, int64_t len, int64_t stride = 0) {
  if (stride == 0) stride = len;
  int64_t c = 0;
  for (; c + 4 <= k; c += 4) {
    const scalar_t *w0 = w + c * stride, *w1 = w0 + stride, *w2 = w1 + stride, *w3 = w2 + stride;
    const scalar_t b0 = alpha[c], b1 = alpha[c + 1], b2 = alpha[c + 2], b3 = alpha[c + 3];
#pragma omp simd
    for (int64_t e = 0; e < len; ++e) y[e] += b0 * w0[e] + b1 * w1[e] + b2 * w2[e] + b3 * w3[e];
  }
  if (c + 2 <= k) {
    const scalar_t *w0 = w + c * stride, *w1 = w0 + stride;
    const scalar_t b0 = alpha[c], b1 = alpha[c + 1];
#pragma omp simd
    for (int64_t e = 0; e < len; ++e) y[e] += b0 * w0[e] + b1 * w1[e];
    c += 2;
  }
  for (; c < k; ++c) axpy(y, alpha[c], w + c * stride, len);
}

// y = Σ_c alpha[c] W_c over the k ≥ 1 rows of W, plus beta · v where v is given, in one pass for up to four rows
// (rows missing from the first four enter with weight zero) where zeroing y and adding made two
template <typename scalar_t>
void set_rows(scalar_t* y, const scalar_t* alpha, const scalar_t* w, int64_t k, int64_t len, scalar_t beta = 0,
              const scalar_t* v = nullptr, int64_t stride = 0) {
  if (stride == 0) stride = len;
  const scalar_t *w0 = w, *w1 = k > 1 ? w + stride : w, *w2 = k > 2 ? w + 2 * stride : w;
  const scalar_t* w3 = k > 3 ? w + 3 * stride : w;
  const scalar_t b0 = alpha[0], b1 = k > 1 ? alpha[1] : 0, b2 = k > 2 ? alpha[2] : 0, b3 = k > 3 ? alpha[3] : 0;
  if (v == nullptr) v = w, beta = 0;
#pragma omp simd
  for (int64_t e = 0; e < len; ++e) y[e] = beta * v[e] + b0 * w0[e] + b1 * w1[e] + b2 * w2[e] + b3 * w3[e];
  if (k > 4) add_rows(y, alpha + 4, w + 4 * stride, k - 4, len, stride);
}

// out[t, :] = Σ_j w[t, j] s[t, j, :]
template <typename scalar_t>
void read_token(const scalar_t* w, const scalar_t* s, scalar_t* out, int64_t n, int64_t d) {
  set_rows(out, w, s, n, d);
}

// gw[t, j] = <g[t], s[t, j]>,  gs[t, j, :] = w[t, j] g[t, :]
template <typename scalar_t>
void read_backward_token(const scalar_t* g, const scalar_t* w, const scalar_t* s, scalar_t* gw, scalar_t* gs,
                         int64_t n, int64_t d) {
  dots(g, s, gw, n, d);
  for (int64_t j = 0; j < n; ++j) scale(gs + j * d, w[j], g, d);
}

// out[t, i, :] = Σ_j M[t, i, j] s[t, j, :] + b[t, i] u[t, :]
template <typename scalar_t>
void write_token(const scalar_t* m, const scalar_t* s, const scalar_t* b, const scalar_t* u, scalar_t* out,
                 int64_t n, int64_t d) {
  for (int64_t i = 0; i < n; ++i) set_rows(out + i * d, m + i * n, s, n, d, b[i], u);
}

// gM[t, i, j] = <g[t, i], s[t, j]>,  gs[t, j] = Σ_i M[t, i, j] g[t, i],  gb[t, i] = <g[t, i], u[t]>,
// gu[t] = Σ_i b[t, i] g[t, i]
template <typename scalar_t>
void write_backward_token(const scalar_t* g, const scalar_t* m, const scalar_t* s, const scalar_t* b,
                          const scalar_t* u, scalar_t* gm, scalar_t* gs, scalar_t* gb, scalar_t* gu, int64_t n,
                          int64_t d) {
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) dots2(g + i * d, g + (i + 1) * d, s, gm + i * n, gm + (i + 1) * n, n, d);
  if (i < n) dots(g + i * d, s, gm + i * n, n, d);
  dots(u, g, gb, n, d);
  set_rows(gu, b, g, n, d);
  scalar_t column[kMaxStreams];
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < n; ++i) column[i] = m[i * n + j];
    set_rows(gs + j * d, column, g, n, d);
  }
}

// Copies `bytes` from src to dst with non-temporal stores (AVX's streaming stores: the line goes to memory without
// being read into the cache first), else as memcpy; the same bytes either way. For a gradient that the step before
// reads only after its sublayer's backward has run, when it has left the caches: a plain store first reads each
// line it writes from memory (a read-for-ownership), a pass over memory more per stream tensor. Measured on the
// AVX-512 Xeon, one thread, the family size, 1 GiB of memory read before each call: a 2.2 MB copy 0.47–0.50 ms with
// plain stores, 0.32–0.35 with these. The streams a forward step writes are read in the same step, so they would
// be made in a scratch block and copied out: 0.05 ms faster of 2.2 so, none with warmer caches; not used there.
// Call store_fence() before the bytes are read by another thread.
void stream_store(void* dst, const void* src, size_t bytes) {
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
#if defined(__AVX__)
  const size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(out) % 32) % 32);
  std::memcpy(out, in, head);
  out += head, in += head, bytes -= head;
  for (; bytes >= 32; bytes -= 32, out += 32, in += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
#endif
  std::memcpy(out, in, bytes);
}

// Orders stream_store's stores before any later one (a parallel task's last step)
void store_fence() {
#if defined(__AVX__)
  _mm_sfence();
#endif
}

// (mean_c x[c]² + eps)^(−1/2) of one row
template <typename scalar_t>
scalar_t inverse_rms_row(const scalar_t* x, int64_t d, double eps) {
  return scalar_t(1) / std::sqrt(dot(x, x, d) / scalar_t(d) + scalar_t(eps));
}

// Runs fn(t) for every token t of N, in parallel_for tasks of kGrain tokens.
template <typename Fn>
void each_token(int64_t N, const Fn& fn) {
  at::parallel_for(0, N, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) fn(t);
  });
}

at::Tensor stream_read(at::Tensor w, at::Tensor s) {
  check(w, "weights");
  check(s, "streams");
  const int64_t N = s.size(0), n = s.size(1), d = s.size(2);
  auto out = at::empty({N, d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "stream_read", [&] {
    const scalar_t *W = w.data_ptr<scalar_t>(), *S = s.data_ptr<scalar_t>();
    scalar_t* O = out.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) { read_token(W + t * n, S + t * n * d, O + t * d, n, d); });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> stream_read_backward(at::Tensor g, at::Tensor w, at::Tensor s) {
  check(g, "grad");
  check(w, "weights");
  check(s, "streams");
  const int64_t N = s.size(0), n = s.size(1), d = s.size(2);
  auto gw = at::empty({N, n}, s.options());
  auto gs = at::empty({N, n, d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "stream_read_backward", [&] {
    const scalar_t *G = g.data_ptr<scalar_t>(), *W = w.data_ptr<scalar_t>(), *S = s.data_ptr<scalar_t>();
    scalar_t *GW = gw.data_ptr<scalar_t>(), *GS = gs.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      read_backward_token(G + t * d, W + t * n, S + t * n * d, GW + t * n, GS + t * n * d, n, d);
    });
  });
  return {gw, gs};
}

at::Tensor stream_write(at::Tensor mix, at::Tensor s, at::Tensor b, at::Tensor u) {
  check(mix, "mix");
  check(s, "streams");
  check(b, "write");
  check(u, "u");
  const int64_t N = s.size(0), n = s.size(1), d = s.size(2);
  auto out = at::empty({N, n, d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "stream_write", [&] {
    const scalar_t *M = mix.data_ptr<scalar_t>(), *S = s.data_ptr<scalar_t>();
    const scalar_t *B = b.data_ptr<scalar_t>(), *U = u.data_ptr<scalar_t>();
    scalar_t* O = out.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      write_token(M + t * n * n, S + t * n * d, B + t * n, U + t * d, O + t * n * d, n, d);
    });
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> stream_write_backward(at::Tensor g, at::Tensor mix, at::Tensor s,
                                                 at::Tensor b, at::Tensor u) {
  check(g, "grad");
  check(mix, "mix");
  check(s, "streams");
  check(b, "write");
  check(u, "u");
  const int64_t N = s.size(0), n = s.size(1), d = s.size(2);
  TORCH_CHECK(n <= kMaxStreams, "at most ", kMaxStreams, " streams, got ", n);
  auto gm = at::empty({N, n, n}, s.options());
  auto gs = at::empty({N, n, d}, s.options());
  auto gb = at::empty({N, n}, s.options());
  auto gu = at::empty({N, d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "stream_write_backward", [&] {
    const scalar_t *G = g.data_ptr<scalar_t>(), *M = mix.data_ptr<scalar_t>(), *S = s.data_ptr<scalar_t>();
    const scalar_t *B = b.data_ptr<scalar_t>(), *U = u.data_ptr<scalar_t>();
    scalar_t *GM = gm.data_ptr<scalar_t>(), *GS = gs.data_ptr<scalar_t>();
    scalar_t *GB = gb.data_ptr<scalar_t>(), *GU = gu.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      write_backward_token(G + t * n * d, M + t * n * n, S + t * n * d, B + t * n, U + t * d, GM + t * n * n,
                           GS + t * n * d, GB + t * n, GU + t * d, n, d);
    });
  });
  return {gm, gs, gb, gu};
}

// r[t] = (mean_c x[t, c]² + eps)^(−1/2)
at::Tensor inverse_rms(at::Tensor x, double eps) {
  check(x, "x");
  const int64_t N = x.size(0), d = x.size(1);
  auto r = at::empty({N}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "inverse_rms", [&] {
    const scalar_t* X = x.data_ptr<scalar_t>();
    scalar_t* R = r.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) { R[t] = inverse_rms_row(X + t * d, d, eps); });
  });
  return r;
}

// Sinkhorn runs on chunks of kLanes tokens laid out (n·n, kLanes): every sum and division is then a loop over
// the chunk's tokens, which the compiler vectorises, where a loop over one token's n values would not be.
constexpr int64_t kLanes = 64;

// `iters` rounds of: divide each column by its sum, then each row by its sum, on the chunk `m` (entry (i, j) of
// lane l at m[(i * n + j) * kLanes + l]), for any n. With `trace`, every iterate after a division (2·iters of them)
// and every sum (2·iters × n × kLanes) is kept for the backward pass.
template <typename scalar_t>
void sinkhorn_chunk_any(scalar_t* m, int64_t n, int64_t iters, scalar_t* trace, scalar_t* sums) {
  const int64_t nn = n * n;
  std::vector<scalar_t> local(n * kLanes), inverse(n * kLanes);
  for (int64_t k = 0; k < iters; ++k) {
    for (int axis = 0; axis < 2; ++axis) {
      const int64_t step = 2 * k + axis;
      scalar_t* sum = sums ? sums + step * n * kLanes : local.data();
      for (int64_t a = 0; a < n; ++a) {
        scalar_t* total = sum + a * kLanes;
        for (int64_t l = 0; l < kLanes; ++l) total[l] = 0;
        for (int64_t b = 0; b < n; ++b) {
          const scalar_t* row = m + (axis == 0 ? b * n + a : a * n + b) * kLanes;
          for (int64_t l = 0; l < kLanes; ++l) total[l] += row[l];
        }
      }
      // one division per sum and a product per entry: the divisions were most of the kernel's time
      for (int64_t a = 0; a < n * kLanes; ++a) inverse[a] = scalar_t(1) / sum[a];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          scalar_t* entry = m + (i * n + j) * kLanes;
          const scalar_t* by = inverse.data() + (axis == 0 ? j : i) * kLanes;
          for (int64_t l = 0; l < kLanes; ++l) entry[l] *= by[l];
        }
      if (trace) std::copy(m, m + nn * kLanes, trace + step * nn * kLanes);
    }
  }
}

// For n known when compiling (mHC's 4 streams, and 2 and 3), the rounds run on a group of kWidth lanes at a time
// with the group's n × n entries held in vector registers through all of them, where sinkhorn_chunk_any loads and
// stores the whole chunk at every sum and division: for 2,048 tokens of 4 streams, one thread, forward 0.13 ms
// against 0.25, backward (its rounds recomputed) 0.27 against 0.57. Each lane gets the same operations in the
// same order (a sum from zero in the order of the entries, its reciprocal, a product per entry), so the
// forward's numbers are the same; backward, Σ ∂y·y is not fused into multiply-adds here, where the compiler fused
// it in sinkhorn_chunk_backward_any's loops (tests/test_native.py checks both against the formula). A group is
// 64 bytes, one AVX-512 register (two on AVX2): 10 % faster than 32 on this machine.
template <typename scalar_t>
struct Group {
  typedef scalar_t Vec __attribute__((vector_size(64)));
  static constexpr int64_t kWidth = 64 / sizeof(scalar_t);
  static_assert(kLanes % kWidth == 0, "a chunk holds whole groups");
  static Vec load(const scalar_t* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(scalar_t* p, Vec v) { std::memcpy(p, &v, sizeof v); }
};

// One division of the group's entries e by their sums over kAxis (0: columns, 1: rows); the sums go to `totals`.
template <int kAxis, int kN, typename Vec>
void divide_by_sums(Vec* e, Vec* totals) {
  Vec inverse[kN];
  for (int a = 0; a < kN; ++a) {
    Vec total = Vec{};
    for (int b = 0; b < kN; ++b) total += e[kAxis == 0 ? b * kN + a : a * kN + b];
    totals[a] = total;
    inverse[a] = 1 / total;
  }
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) e[i * kN + j] *= inverse[kAxis == 0 ? j : i];
}

// The rounds on one group's entries e; with `trace`, each step's entries and then its sums (kN² + kN vectors a
// step, 2·iters steps).
template <int kN, typename Vec>
void group_rounds(Vec* e, int64_t iters, Vec* trace) {
  constexpr int kStep = kN * kN + kN;
  Vec totals[kN];
  auto keep = [&](int64_t step) {
    if (!trace) return;
    std::copy(e, e + kN * kN, trace + step * kStep);
    std::copy(totals, totals + kN, trace + step * kStep + kN * kN);
  };
  for (int64_t k = 0; k < iters; ++k) {
    divide_by_sums<0, kN>(e, totals);
    keep(2 * k);
    divide_by_sums<1, kN>(e, totals);
    keep(2 * k + 1);
  }
}

template <typename scalar_t, int kN>
void sinkhorn_chunk_fixed(scalar_t* m, int64_t iters) {
  using G = Group<scalar_t>;
  typename G::Vec e[kN * kN];
  for (int64_t l0 = 0; l0 < kLanes; l0 += G::kWidth) {
    for (int k = 0; k < kN * kN; ++k) e[k] = G::load(m + k * kLanes + l0);
    group_rounds<kN>(e, iters, static_cast<typename G::Vec*>(nullptr));
    for (int k = 0; k < kN * kN; ++k) G::store(m + k * kLanes + l0, e[k]);
  }
}

// The one choice between the two paths: fixed(std::integral_constant<int, n>{}) for the numbers of streams held
// in registers, any() for the others.
template <typename Fixed, typename Any>
void by_streams(int64_t n, Fixed&& fixed, Any&& any) {
  switch (n) {
    case 2: return fixed(std::integral_constant<int, 2>{});
    case 3: return fixed(std::integral_constant<int, 3>{});
    case 4: return fixed(std::integral_constant<int, 4>{});
    default: return any();
  }
}

// Sinkhorn's rounds on the chunk m in place.
template <typename scalar_t>
void sinkhorn_chunk(scalar_t* m, int64_t n, int64_t iters) {
  by_streams(
      n, [&](auto kN) { sinkhorn_chunk_fixed<scalar_t, decltype(kN)::value>(m, iters); },
      [&] { sinkhorn_chunk_any<scalar_t>(m, n, iters, nullptr, nullptr); });
}

// Tokens [begin, begin + count) of (tokens, n, n) into a chunk, padded with ones (any positive matrix would do).
template <typename scalar_t>
void gather(const scalar_t* src, int64_t begin, int64_t count, int64_t nn, scalar_t* chunk) {
  std::fill(chunk, chunk + nn * kLanes, scalar_t(1));
  for (int64_t l = 0; l < count; ++l)
    for (int64_t e = 0; e < nn; ++e) chunk[e * kLanes + l] = src[(begin + l) * nn + e];
}

template <typename scalar_t>
void scatter(const scalar_t* chunk, int64_t begin, int64_t count, int64_t nn, scalar_t* dst) {
  for (int64_t l = 0; l < count; ++l)
    for (int64_t e = 0; e < nn; ++e) dst[(begin + l) * nn + e] = chunk[e * kLanes + l];
}

void check_sinkhorn(const at::Tensor& m) {
  check(m, "matrices");
  TORCH_CHECK(m.dim() == 3 && m.size(1) == m.size(2), "Sinkhorn takes (tokens, n, n) matrices");
}

at::Tensor sinkhorn(at::Tensor m0, int64_t iters) {
  check_sinkhorn(m0);
  const int64_t N = m0.size(0), n = m0.size(1), nn = n * n;
  auto out = at::empty_like(m0);
  AT_DISPATCH_FLOATING_TYPES(m0.scalar_type(), "sinkhorn", [&] {
    const scalar_t* M0 = m0.data_ptr<scalar_t>();
    scalar_t* O = out.data_ptr<scalar_t>();
    at::parallel_for(0, (N + kLanes - 1) / kLanes, 1, [&](int64_t first, int64_t last) {
      std::vector<scalar_t> chunk(nn * kLanes);
      for (int64_t c = first; c < last; ++c) {
        const int64_t begin = c * kLanes, count = std::min(kLanes, N - begin);
        gather(M0, begin, count, nn, chunk.data());
        sinkhorn_chunk<scalar_t>(chunk.data(), n, iters);
        scatter(chunk.data(), begin, count, nn, O);
      }
    });
  });
  return out;
}

// Scratch space for the backward pass through one chunk's Sinkhorn rounds.
template <typename scalar_t>
struct SinkhornScratch {
  std::vector<scalar_t> trace, sums, dots, inverse;  // sinkhorn_chunk_backward_any's
  std::vector<typename Group<scalar_t>::Vec> steps;  // sinkhorn_chunk_backward_fixed's, one group's rounds
  SinkhornScratch(int64_t n, int64_t iters) {  // only the path n takes gets its buffers
    by_streams(
        n, [&](auto) { steps.resize(2 * iters * (n * n + n)); },
        [&] {
          trace.resize(2 * iters * n * n * kLanes), sums.resize(2 * iters * n * kLanes);
          dots.resize(n * kLanes), inverse.resize(n * kLanes);
        });
  }
};

// g (a chunk's gradient with respect to Sinkhorn's output) becomes the gradient with respect to its input m
// (the chunk, overwritten by the recomputed rounds). Backward of one division y = m / s, s the sum over the
// axis:  dm = (dy − Σ_axis(dy · y)) / s.
template <typename scalar_t>
void sinkhorn_chunk_backward_any(scalar_t* m, scalar_t* g, int64_t n, int64_t iters, SinkhornScratch<scalar_t>& tmp) {
  const int64_t nn = n * n;
  sinkhorn_chunk_any<scalar_t>(m, n, iters, tmp.trace.data(), tmp.sums.data());
  for (int64_t step = 2 * iters - 1; step >= 0; --step) {
    const int axis = step % 2;
    const scalar_t* y = tmp.trace.data() + step * nn * kLanes;
    const scalar_t* s = tmp.sums.data() + step * n * kLanes;
    for (int64_t a = 0; a < n; ++a) {
      scalar_t* dot = tmp.dots.data() + a * kLanes;
      for (int64_t l = 0; l < kLanes; ++l) dot[l] = 0;
      for (int64_t b = 0; b < n; ++b) {
        const int64_t e = (axis == 0 ? b * n + a : a * n + b) * kLanes;
        for (int64_t l = 0; l < kLanes; ++l) dot[l] += g[e + l] * y[e + l];
      }
    }
    for (int64_t a = 0; a < n * kLanes; ++a) tmp.inverse[a] = scalar_t(1) / s[a];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t a = (axis == 0 ? j : i) * kLanes;
        scalar_t* ge = g + (i * n + j) * kLanes;
        for (int64_t l = 0; l < kLanes; ++l) ge[l] = (ge[l] - tmp.dots[a + l]) * tmp.inverse[a + l];
      }
  }
}

// The backward of one division over kAxis for a group: ge (the gradient with respect to its output y, whose
// sums were s) becomes the gradient with respect to its input.
template <int kAxis, int kN, typename Vec>
void undo_division(Vec* ge, const Vec* y, const Vec* s) {
  Vec dot[kN];
  for (int a = 0; a < kN; ++a) {
    dot[a] = Vec{};
    for (int b = 0; b < kN; ++b) {
      const int e = kAxis == 0 ? b * kN + a : a * kN + b;
      dot[a] += ge[e] * y[e];
    }
  }
  Vec inverse[kN];
  for (int a = 0; a < kN; ++a) inverse[a] = 1 / s[a];
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) {
      const int a = kAxis == 0 ? j : i;
      ge[i * kN + j] = (ge[i * kN + j] - dot[a]) * inverse[a];
    }
}

// sinkhorn_chunk_backward_any for n known when compiling, a group at a time: its rounds recomputed into
// tmp.steps (a few kilobytes, in L1), then undone step by step with its gradient in registers. m is left as it was.
template <typename scalar_t, int kN>
void sinkhorn_chunk_backward_fixed(const scalar_t* m, scalar_t* g, int64_t iters, SinkhornScratch<scalar_t>& tmp) {
  using G = Group<scalar_t>;
  using Vec = typename G::Vec;
  constexpr int kStep = kN * kN + kN;
  Vec e[kN * kN], ge[kN * kN];
  for (int64_t l0 = 0; l0 < kLanes; l0 += G::kWidth) {
    for (int k = 0; k < kN * kN; ++k) e[k] = G::load(m + k * kLanes + l0), ge[k] = G::load(g + k * kLanes + l0);
    group_rounds<kN>(e, iters, tmp.steps.data());
    for (int64_t step = 2 * iters - 1; step >= 0; --step) {
      const Vec* y = tmp.steps.data() + step * kStep;
      if (step % 2 == 0)
        undo_division<0, kN>(ge, y, y + kN * kN);
      else
        undo_division<1, kN>(ge, y, y + kN * kN);
    }
    for (int k = 0; k < kN * kN; ++k) G::store(g + k * kLanes + l0, ge[k]);
  }
}

// g, a chunk's gradient with respect to Sinkhorn's output, becomes the gradient with respect to its input m (a
// chunk of matrices whose contents are undefined afterwards).
template <typename scalar_t>
void sinkhorn_chunk_backward(scalar_t* m, scalar_t* g, int64_t n, int64_t iters, SinkhornScratch<scalar_t>& tmp) {
  by_streams(
      n, [&](auto kN) { sinkhorn_chunk_backward_fixed<scalar_t, decltype(kN)::value>(m, g, iters, tmp); },
      [&] { sinkhorn_chunk_backward_any<scalar_t>(m, g, n, iters, tmp); });
}

// The gradient of sinkhorn(m0) with respect to m0. The rounds are recomputed chunk by chunk, which costs less
// than keeping 2·iters copies of the matrices from the forward pass.
at::Tensor sinkhorn_backward(at::Tensor grad, at::Tensor m0, int64_t iters) {
  check_sinkhorn(m0);
  check(grad, "grad");
  const int64_t N = m0.size(0), n = m0.size(1), nn = n * n;
  auto out = at::empty_like(grad);
  AT_DISPATCH_FLOATING_TYPES(m0.scalar_type(), "sinkhorn_backward", [&] {
    const scalar_t* M0 = m0.data_ptr<scalar_t>();
    const scalar_t* G = grad.data_ptr<scalar_t>();
    scalar_t* O = out.data_ptr<scalar_t>();
    at::parallel_for(0, (N + kLanes - 1) / kLanes, 1, [&](int64_t first, int64_t last) {
      std::vector<scalar_t> chunk(nn * kLanes), g(nn * kLanes);
      SinkhornScratch<scalar_t> tmp(n, iters);
      for (int64_t c = first; c < last; ++c) {
        const int64_t begin = c * kLanes, count = std::min(kLanes, N - begin);
        gather(M0, begin, count, nn, chunk.data());
        gather(G, begin, count, nn, g.data());
        sinkhorn_chunk_backward(chunk.data(), g.data(), n, iters, tmp);
        scatter(g.data(), begin, count, nn, O);
      }
    });
  });
  return out;
}

// ---- the per-token weights of HC and mHC from their projections (the elementwise tails of the coefficient
// functions in rrlib.rules.depth_mixing.hyper_weights: a few dozen small operations per sublayer as PyTorch, one
// loop here)

constexpr int64_t kTokensPerPartial = 256;  // tokens whose parameter gradients are summed into one partial sum

int64_t n_partials(int64_t N) { return (N + kTokensPerPartial - 1) / kTokensPerPartial; }

// Whether a step's forward writes its streams first: its mix, write weights and u, given together
bool writes(const std::optional<at::Tensor>& mix, const std::optional<at::Tensor>& write_weights,
            const std::optional<at::Tensor>& u) {
  TORCH_CHECK(mix.has_value() == write_weights.has_value() && mix.has_value() == u.has_value(),
              "the write takes its mix, write weights and u together");
  if (!mix) return false;
  check(*mix, "mix");
  check(*write_weights, "write");
  check(*u, "u");
  return true;
}

// HC's step forward, a block of kTokensPerPartial tokens at a time, so that the block's streams stay in L2 from
// their write to the read (a stream tensor outgrows L2 at the family size, and as separate kernels the write, the
// norm, the projection and the read each read the streams from memory):
//   [x = M s + b ⊗ u with a write,]  r = rms(x_tj)^{-1} and q = W x_tj for each stream row x_tj (q by ATen, on
//   the block's rows),  tanh(P) = tanh(q r) (ATen's vectorised tanh, on the block),
//   c = static + s ⊙ tanh(P),  s = s_α on columns 0…n and s_β on column n+1,
//   a[j] = c[j, 0],  b[i] = c[i, n+1],  M'[i, j] = c[j, 1+i]  (A_rᵀ: row i of M' makes stream i),
//   h = Σ_j a_j x_j.
// q and tanh(P) are (N·n, n + 2), a row per stream row. Returns (x, h, a, b, M', r, q, tanh(P)).
std::vector<at::Tensor> hc_step(at::Tensor streams, std::optional<at::Tensor> mix,
                                std::optional<at::Tensor> write_weights, std::optional<at::Tensor> u, at::Tensor w,
                                at::Tensor stat, at::Tensor scales, double eps) {
  check(streams, "streams");
  check(w, "weight");
  check(stat, "static");
  check(scales, "scales");
  const int64_t N = streams.size(0), n = streams.size(1), d = streams.size(2), K = n + 2;
  TORCH_CHECK(w.size(0) == K && w.size(1) == d && stat.numel() == n * K && scales.numel() == 2,
              "HC's step takes streams (N, n, d), W (n + 2, d), static (n, n + 2) and two scales");
  const bool written = writes(mix, write_weights, u);
  const auto options = streams.options();
  auto x = written ? at::empty_like(streams) : streams;
  auto h = at::empty({N, d}, options), a = at::empty({N, n}, options), b = at::empty({N, n}, options);
  auto m = at::empty({N, n, n}, options), r = at::empty({N * n}, options);
  auto q = at::empty({N * n, K}, options), th = at::empty({N * n, K}, options);
  const auto rows = x.view({N * n, d});
  AT_DISPATCH_FLOATING_TYPES(streams.scalar_type(), "hc_step", [&] {
    const scalar_t *S = streams.data_ptr<scalar_t>(), *C0 = stat.data_ptr<scalar_t>();
    const scalar_t sa = scales.data_ptr<scalar_t>()[0], sb = scales.data_ptr<scalar_t>()[1];
    const scalar_t* MIX = written ? mix->data_ptr<scalar_t>() : nullptr;
    const scalar_t* B = written ? write_weights->data_ptr<scalar_t>() : nullptr;
    const scalar_t* U = written ? u->data_ptr<scalar_t>() : nullptr;
    scalar_t *X = x.data_ptr<scalar_t>(), *H = h.data_ptr<scalar_t>(), *A = a.data_ptr<scalar_t>();
    scalar_t *BO = b.data_ptr<scalar_t>(), *M = m.data_ptr<scalar_t>(), *R = r.data_ptr<scalar_t>();
    scalar_t *Q = q.data_ptr<scalar_t>(), *TH = th.data_ptr<scalar_t>();
    at::parallel_for(0, n_partials(N), 1, [&](int64_t first, int64_t last) {
      for (int64_t block = first; block < last; ++block) {
        const int64_t begin = block * kTokensPerPartial, count = std::min(kTokensPerPartial, N - begin);
        for (int64_t t = begin; t < begin + count; ++t) {
          if (written) write_token(MIX + t * n * n, S + t * n * d, B + t * n, U + t * d, X + t * n * d, n, d);
          for (int64_t row = t * n; row < (t + 1) * n; ++row) R[row] = inverse_rms_row(X + row * d, d, eps);
        }
        // W's n + 2 rows by the block's rows: MKL makes this product 2× faster than the rows by Wᵀ
        const auto q_columns = at::mm(w, rows.narrow(0, begin * n, count * n).t());
        const scalar_t* QC = q_columns.data_ptr<scalar_t>();
        for (int64_t row = begin * n, e = 0; row < (begin + count) * n; ++row, ++e)
          for (int64_t k = 0; k < K; ++k) {
            Q[row * K + k] = QC[k * count * n + e];
            TH[row * K + k] = Q[row * K + k] * R[row];
          }
        th.narrow(0, begin * n, count * n).tanh_();
        for (int64_t t = begin; t < begin + count; ++t) {
          for (int64_t j = 0; j < n; ++j) {
            const scalar_t *tj = TH + (t * n + j) * K, *cj = C0 + j * K;
            A[t * n + j] = cj[0] + sa * tj[0];
            for (int64_t i = 0; i < n; ++i) M[(t * n + i) * n + j] = cj[1 + i] + sa * tj[1 + i];
            BO[t * n + j] = cj[n + 1] + sb * tj[n + 1];
          }
          read_token(A + t * n, X + t * n * d, H + t * d, n, d);
        }
      }
    });
  });
  return {x, h, a, b, m, r, q, th};
}

// The streams a step node wrote x from, x = M s + b ⊗ u, when its backward takes the write's too
struct Write {
  at::Tensor s, m, b, u;
};

std::optional<Write> write_of(const std::optional<at::Tensor>& s, const std::optional<at::Tensor>& m,
                              const std::optional<at::Tensor>& b, const std::optional<at::Tensor>& u) {
  TORCH_CHECK(s.has_value() == m.has_value(),
              "the write's backward takes its streams, mix, write weights and u together");
  if (!writes(m, b, u)) return std::nullopt;
  check(*s, "streams before the write");
  return Write{*s, *m, *b, *u};
}

// The write's gradients (∂M, ∂s, ∂b, ∂u) for streams (N, n, d), or four empty tensors without a write
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> write_grads(const std::optional<Write>& write, int64_t N,
                                                                      int64_t n, int64_t d,
                                                                      const at::TensorOptions& options) {
  if (!write) {
    auto none = at::empty({0}, options);
    return {none, none, none, none};
  }
  return {at::empty({N, n, n}, options), at::empty({N, n, d}, options), at::empty({N, n}, options),
          at::empty({N, d}, options)};
}

// A step node's ∂x for token t goes to gx_t; with a write, the write's backward (stream_write_backward's, the same
// arithmetic) runs on it at once, from L1, and gives ∂s in its place: ∂x is never written out and read back
template <typename scalar_t>
struct WriteBackward {
  const scalar_t *S = nullptr, *M = nullptr, *B = nullptr, *U = nullptr;
  scalar_t *GM = nullptr, *GS = nullptr, *GB = nullptr, *GU = nullptr;
  int64_t n, d;

  WriteBackward(const std::optional<Write>& write,
                const std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>& grads, int64_t n, int64_t d)
      : n(n), d(d) {
    if (!write) return;
    S = write->s.data_ptr<scalar_t>(), M = write->m.data_ptr<scalar_t>(), B = write->b.data_ptr<scalar_t>();
    U = write->u.data_ptr<scalar_t>();
    GM = std::get<0>(grads).data_ptr<scalar_t>(), GS = std::get<1>(grads).data_ptr<scalar_t>();
    GB = std::get<2>(grads).data_ptr<scalar_t>(), GU = std::get<3>(grads).data_ptr<scalar_t>();
  }

  // where token t's ∂x is made: the node's output without a write, else the thread's scratch row
  scalar_t* target(scalar_t* gx, int64_t t, std::vector<scalar_t>& scratch) const {
    return S == nullptr ? gx + t * n * d : scratch.data();
  }

  // token t's streams as the forward wrote them: x itself without a write, else x = M s + b ⊗ u made again into
  // ``row`` by write_token (the forward's own function, so the same bits) from the streams before the write, which
  // finish reads for the token anyway. x is not read from memory then: a stream-sized pass less a step.
  const scalar_t* written(const scalar_t* x, int64_t t, scalar_t* row) const {
    if (S == nullptr) return x + t * n * d;
    write_token(M + t * n * n, S + t * n * d, B + t * n, U + t * d, row, n, d);
    return row;
  }

  // the write's backward on token t's ∂x; ∂s is made in ``row`` (n·d) and streamed to its place (stream_store):
  // the step before reads it only after its sublayer's backward
  void finish(const scalar_t* gx_t, int64_t t, scalar_t* row) const {
    if (S == nullptr) return;
    write_backward_token(gx_t, M + t * n * n, S + t * n * d, B + t * n, U + t * d, GM + t * n * n, row, GB + t * n,
                         GU + t * d, n, d);
    stream_store(GS + t * n * d, row, n * d * sizeof(scalar_t));
  }
};

// Their gradient, with the read's and the norm's, one token at a time (for HC's step node in
// rrlib.rules.depth_mixing.hyper_weights):
//   ∂a_j = <∂h, x_j>;  ∂c from (∂a, ∂b, ∂M);  ∂P = ∂c · s · (1 − tanh²P),  ∂static = Σ_t ∂c,
//   ∂s = Σ ∂c · tanh P over each scale's columns;  ∂q_j = ∂P_j r_j;
//   ∂x_j = a_j ∂h + Σ_k ∂q_jk W_k − (r_j³/d)(Σ_k ∂P_jk q_jk) x_j,  ∂W_k = Σ_t Σ_j ∂q_jk x_j
// for the rows x_j of the streams, r_j = rms(x_j)^{-1} and q_j = W x_j; q and tanh(P) as hc_step makes them,
// (N·n, n + 2). With ``gx_in`` (the streams' gradient from their other consumer, the next write), ∂x starts from
// it; with the write that made x (``streams_before`` …), x is made again from it rather than read, and the write's
// backward follows in the same token loop (WriteBackward). Returns (∂x, or with a write the earlier streams'
// gradient, ∂W, ∂static, ∂scales, then the write's ∂M, ∂b, ∂u, empty without one); parameter sums are per block
// of tokens, then added in order. Where the read's backward, the weights', the norm's and the projection's were
// separate, ∂x took three passes (the read's, the norm's, the projection's matrix product), and ∂a, ∂P and ∂q
// a tensor each; ATen's products for ∂q W and ∂qᵀ x, with six columns, ran at a fraction of their speed on
// wider matrices.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> hc_step_backward(
    at::Tensor gh, at::Tensor gb, at::Tensor gm, at::Tensor x, at::Tensor a, at::Tensor r, at::Tensor q,
    at::Tensor th, at::Tensor w, at::Tensor scales, std::optional<at::Tensor> gx_in,
    std::optional<at::Tensor> s_before, std::optional<at::Tensor> mix, std::optional<at::Tensor> write_weights,
    std::optional<at::Tensor> u) {
  check(gh, "grad of h");
  check(gb, "grad of b");
  check(gm, "grad of M");
  check(x, "streams");
  check(a, "a");
  check(r, "inverse rms");
  check(q, "q");
  check(th, "tanh of the projection");
  check(w, "weight");
  check(scales, "scales");
  if (gx_in) check(*gx_in, "grad of the streams");
  const int64_t N = x.size(0), n = x.size(1), d = x.size(2), K = n + 2, blocks = n_partials(N);
  TORCH_CHECK(n <= kMaxStreams && th.numel() == N * n * K && q.numel() == N * n * K && r.numel() == N * n &&
                  w.numel() == K * d,
              "HC's step backward takes streams (N, n, d), q and tanh(P) (N·n, n + 2) and W (n + 2, d)");
  const int64_t width = n * K + 2 + K * d;  // a block's ∂static, ∂s and ∂W
  const auto write = write_of(s_before, mix, write_weights, u);
  auto gx = write ? at::empty({0}, x.options()) : at::empty_like(x);
  auto write_out = write_grads(write, N, n, d, x.options());
  auto partial = at::zeros({blocks, width}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "hc_step_backward", [&] {
    const scalar_t *GH = gh.data_ptr<scalar_t>(), *GB = gb.data_ptr<scalar_t>(), *GM = gm.data_ptr<scalar_t>();
    const scalar_t *X = x.data_ptr<scalar_t>(), *A = a.data_ptr<scalar_t>(), *R = r.data_ptr<scalar_t>();
    const scalar_t *Q = q.data_ptr<scalar_t>(), *TH = th.data_ptr<scalar_t>(), *W = w.data_ptr<scalar_t>();
    const scalar_t *SC = scales.data_ptr<scalar_t>(), *GX_IN = gx_in ? gx_in->data_ptr<scalar_t>() : nullptr;
    scalar_t *GX = write ? nullptr : gx.data_ptr<scalar_t>(), *PART = partial.data_ptr<scalar_t>();
    const WriteBackward<scalar_t> write_backward(write, write_out, n, d);
    at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      std::vector<scalar_t> gp(n * K), gq(n * K), scratch(write ? n * d : 0), remade(write ? n * d : 0);
      std::vector<scalar_t> gs_row(write ? n * d : 0);
      scalar_t ga[kMaxStreams], column[kMaxStreams];
      for (int64_t block = first; block < last; ++block) {
        scalar_t* g_static = PART + block * width;
        scalar_t *g_scales = g_static + n * K, *g_weight = g_scales + 2;
        for (int64_t t = block * kTokensPerPartial; t < std::min(N, (block + 1) * kTokensPerPartial); ++t) {
          const scalar_t *gh_t = GH + t * d, *x_t = write_backward.written(X, t, remade.data());
          scalar_t* gx_t = write_backward.target(GX, t, scratch);
          dots(gh_t, x_t, ga, n, d);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t col = 0; col < K; ++col) {
              const scalar_t gc = col == 0 ? ga[j] : col == n + 1 ? GB[t * n + j] : GM[(t * n + col - 1) * n + j];
              const scalar_t tanh = TH[(t * n + j) * K + col];
              gp[j * K + col] = gc * SC[col == n + 1] * (scalar_t(1) - tanh * tanh);
              g_static[j * K + col] += gc;
              g_scales[col == n + 1] += gc * tanh;
            }
          for (int64_t j = 0; j < n; ++j) {
            const int64_t row = t * n + j;
            const scalar_t rj = R[row];
            scalar_t norm = 0;
            for (int64_t k = 0; k < K; ++k) {
              gq[j * K + k] = gp[j * K + k] * rj;
              norm += gp[j * K + k] * Q[row * K + k];
            }
            const scalar_t coef = norm * rj * rj * rj * scalar_t(-1.0 / d);
            if (GX_IN)
              combine_into(gx_t + j * d, GX_IN + row * d, A[row], gh_t, coef, x_t + j * d, d);
            else
              combine(gx_t + j * d, A[row], gh_t, coef, x_t + j * d, d);
            add_rows(gx_t + j * d, gq.data() + j * K, W, K, d);
          }
          write_backward.finish(gx_t, t, gs_row.data());
          for (int64_t k = 0; k < K; ++k) {  // ∂W_k += Σ_j ∂q_jk x_j, the token's rows in one pass over ∂W_k
            for (int64_t j = 0; j < n; ++j) column[j] = gq[j * K + k];
            add_rows(g_weight + k * d, column, x_t, n, d);
          }
        }
      }
      store_fence();
    });
  });
  auto sums = partial.sum(0);
  auto [gm_write, gs, gb_write, gu] = write_out;
  return {write ? gs : gx, sums.narrow(0, n * K + 2, K * d).view({K, d}), sums.narrow(0, 0, n * K).view({n, K}),
          sums.narrow(0, n * K, 2), gm_write, gb_write, gu};
}

template <typename scalar_t>
scalar_t sigmoid(scalar_t x) {
  return scalar_t(1) / (scalar_t(1) + std::exp(-x));
}

// mHC's weights for tokens [begin, begin + count), count ≤ kLanes (one chunk of Sinkhorn lanes):
//   logits = α_g ⊙ P + bias,  P (N, 2n + n²) in groups g = (pre: n, post: n, res: n²);
//   pre = σ(logits_pre),  post = 2σ(logits_post),  H = Sinkhorn(m0),  m0 = exp(L − max L),  L = logits_res as n × n.
// The max is a constant per token (Sinkhorn's first normalisation cancels it), so no gradient flows through it; the
// backward pass reads the derivatives off pre, post and m0.
template <typename scalar_t>
void mhc_weights_chunk(const scalar_t* P, const scalar_t* AL, const scalar_t* BI, int64_t begin, int64_t count,
                       int64_t n, int64_t iters, scalar_t* PRE, scalar_t* POST, scalar_t* RES, scalar_t* M0,
                       scalar_t* chunk) {
  const int64_t nn = n * n, C = 2 * n + nn;
  for (int64_t t = begin; t < begin + count; ++t) {
    const scalar_t* pt = P + t * C;
    for (int64_t i = 0; i < n; ++i) {
      PRE[t * n + i] = sigmoid(AL[0] * pt[i] + BI[i]);
      POST[t * n + i] = 2 * sigmoid(AL[1] * pt[n + i] + BI[n + i]);
    }
    scalar_t* mt = M0 + t * nn;
    scalar_t top = -std::numeric_limits<scalar_t>::infinity();
    for (int64_t e = 0; e < nn; ++e) top = std::max(top, mt[e] = AL[2] * pt[2 * n + e] + BI[2 * n + e]);
    for (int64_t e = 0; e < nn; ++e) mt[e] = std::exp(mt[e] - top);
  }
  gather(M0, begin, count, nn, chunk);
  sinkhorn_chunk<scalar_t>(chunk, n, iters);
  scatter(chunk, begin, count, nn, RES);
}

// mHC's step forward, a block of kTokensPerPartial tokens at a time, so that the block's streams stay in L2 from
// their write to the read: [x = M s + b ⊗ u with a write,] r = rms(x_t)^{-1} over the token's n·d, q = x Wᵀ (ATen,
// on the block), P = q r, the weights (mhc_weights_chunk, on chunks of kLanes tokens) and
// h = Σ_j pre_j x_j. As separate kernels the write, the norm, the projection and the read each read the streams
// from memory (a stream tensor outgrows L2 at the family size). Returns (x, h, pre, post, H_res, m0, P, r, q).
std::vector<at::Tensor> mhc_step(at::Tensor streams, std::optional<at::Tensor> mix,
                                 std::optional<at::Tensor> write_weights,
                                 std::optional<at::Tensor> u, at::Tensor w, at::Tensor alpha, at::Tensor bias,
                                 int64_t iters, double eps) {
  check(streams, "streams");
  check(w, "weight");
  check(alpha, "alpha");
  check(bias, "bias");
  const int64_t N = streams.size(0), n = streams.size(1), d = streams.size(2), L = n * d, nn = n * n;
  const int64_t C = 2 * n + nn;
  TORCH_CHECK(w.size(0) == C && w.size(1) == L && bias.numel() == C && alpha.numel() == 3,
              "mHC's step takes streams (N, n, d) and W (2n + n², n·d)");
  static_assert(kTokensPerPartial % kLanes == 0, "a block holds whole Sinkhorn chunks");
  const bool written = writes(mix, write_weights, u);
  const auto options = streams.options();
  auto x = written ? at::empty_like(streams) : streams;
  auto h = at::empty({N, d}, options), pre = at::empty({N, n}, options), post = at::empty({N, n}, options);
  auto res = at::empty({N, n, n}, options), m0 = at::empty({N, n, n}, options), p = at::empty({N, C}, options);
  auto r = at::empty({N}, options), q = at::empty({N, C}, options);
  const auto rows = x.view({N, L}), wt = w.t();
  AT_DISPATCH_FLOATING_TYPES(streams.scalar_type(), "mhc_step", [&] {
    const scalar_t *S = streams.data_ptr<scalar_t>(), *AL = alpha.data_ptr<scalar_t>(), *BI = bias.data_ptr<scalar_t>();
    const scalar_t *M = written ? mix->data_ptr<scalar_t>() : nullptr;
    const scalar_t* B = written ? write_weights->data_ptr<scalar_t>() : nullptr;
    const scalar_t* U = written ? u->data_ptr<scalar_t>() : nullptr;
    scalar_t *X = x.data_ptr<scalar_t>(), *H = h.data_ptr<scalar_t>(), *PRE = pre.data_ptr<scalar_t>();
    scalar_t *POST = post.data_ptr<scalar_t>(), *RES = res.data_ptr<scalar_t>(), *M0 = m0.data_ptr<scalar_t>();
    scalar_t *P = p.data_ptr<scalar_t>(), *R = r.data_ptr<scalar_t>(), *Q = q.data_ptr<scalar_t>();
    at::parallel_for(0, n_partials(N), 1, [&](int64_t first, int64_t last) {
      std::vector<scalar_t> chunk(nn * kLanes);
      for (int64_t block = first; block < last; ++block) {
        const int64_t begin = block * kTokensPerPartial, count = std::min(kTokensPerPartial, N - begin);
        for (int64_t t = begin; t < begin + count; ++t) {
          if (written) write_token(M + t * nn, S + t * L, B + t * n, U + t * d, X + t * L, n, d);
          R[t] = inverse_rms_row(X + t * L, L, eps);
        }
        auto q_block = q.narrow(0, begin, count);
        at::mm_out(q_block, rows.narrow(0, begin, count), wt);
        for (int64_t t = begin; t < begin + count; ++t)
          for (int64_t c = 0; c < C; ++c) P[t * C + c] = Q[t * C + c] * R[t];
        for (int64_t start = begin; start < begin + count; start += kLanes)
          mhc_weights_chunk(P, AL, BI, start, std::min(kLanes, begin + count - start), n, iters, PRE, POST, RES, M0,
                            chunk.data());
        for (int64_t t = begin; t < begin + count; ++t) read_token(PRE + t * n, X + t * L, H + t * d, n, d);
      }
    });
  });
  return {x, h, pre, post, res, m0, p, r, q};
}

// The weights' gradient for one chunk of count ≤ kLanes tokens, every pointer at the chunk's first token:
//   ∂logits = (∂pre · pre(1 − pre), ∂post · post(1 − post/2), Sinkhorn's backward · m0),  ∂P = ∂logits · α_g,
//   ∂α_g += Σ ∂logits · P over the group,  ∂bias += Σ_t ∂logits.
template <typename scalar_t>
void mhc_weights_backward_chunk(const scalar_t* gpre, const scalar_t* gpost, const scalar_t* gres, const scalar_t* pre,
                                const scalar_t* post, const scalar_t* m0, const scalar_t* p, const scalar_t* al,
                                int64_t count, int64_t n, int64_t iters, SinkhornScratch<scalar_t>& tmp,
                                scalar_t* chunk, scalar_t* g, scalar_t* gp, scalar_t* g_bias, scalar_t* g_alpha) {
  const int64_t nn = n * n, C = 2 * n + nn;
  gather(m0, 0, count, nn, chunk);
  gather(gres, 0, count, nn, g);
  sinkhorn_chunk_backward(chunk, g, n, iters, tmp);  // g: the gradient with respect to m0
  // a loop per group of columns, without a branch per column; each sum's terms come in the same order as in one
  // loop over the tokens and their columns (a group's ∂α takes only its own columns)
  auto group = [&](int64_t first, int64_t width, int64_t k, auto&& logit) {
    for (int64_t l = 0; l < count; ++l)
      for (int64_t c = 0; c < width; ++c) {
        const scalar_t gl = logit(l, c);
        gp[l * C + first + c] = gl * al[k];
        g_bias[first + c] += gl;
        g_alpha[k] += gl * p[l * C + first + c];
      }
  };
  group(0, n, 0, [&](int64_t l, int64_t c) {
    const scalar_t y = pre[l * n + c];
    return gpre[l * n + c] * y * (scalar_t(1) - y);
  });
  group(n, n, 1, [&](int64_t l, int64_t c) {
    const scalar_t y = post[l * n + c];
    return gpost[l * n + c] * y * (scalar_t(1) - y / 2);
  });
  group(2 * n, nn, 2, [&](int64_t l, int64_t c) { return g[c * kLanes + l] * m0[l * nn + c]; });
}

// y += alpha · a + beta · b (+ c where given) over d channels
template <typename scalar_t>
void add_terms(scalar_t* y, scalar_t alpha, const scalar_t* a, scalar_t beta, const scalar_t* b, const scalar_t* c,
               int64_t d) {
  if (c == nullptr) {
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) y[e] += alpha * a[e] + beta * b[e];
  } else {
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) y[e] += alpha * a[e] + beta * b[e] + c[e];
  }
}

// mHC's step backward (mhc_step's), a block of kTokensPerPartial tokens at a time, so that the block's rows stay
// in L2 between its passes:
//   ∂a_tj = <∂h_t, x_tj>;  the weights' backward on the block's Sinkhorn chunks (mhc_weights_backward_chunk);
//   ∂q = ∂P r,  norm_t = −(r_t³/nd) Σ_k ∂P_tk q_tk;
//   ∂x_t = ∂q_t W + a_t ⊗ ∂h_t + ∂x_in,t + norm_t x_t,   ∂W += ∂q_blockᵀ x_block
// for the token's row x_t (n·d) and W (2n + n², n·d), the two matrix products by ATen (MKL) on the block; with a
// write, its backward runs on each token's ∂x at once (WriteBackward). ∂α and ∂bias are summed per Sinkhorn
// chunk, ∂W per block, then in order. As separate operations (the read's backward, the weights', the
// projection's, +=, addcmul_, addmm_, ∂qᵀ x, the write's) the backward made some fourteen passes over
// stream-sized tensors, each read from memory at the family size; here ∂x_in and the streams before the write
// are read once (x made again from the latter, WriteBackward::written; x read without a write) and their
// gradient written once. Returns (∂x, or with a write the earlier streams' gradient, ∂W, ∂α, ∂bias, then the
// write's ∂M, ∂b, ∂u, empty without one).
std::vector<at::Tensor> mhc_step_backward(at::Tensor gh, at::Tensor gpost, at::Tensor gres, at::Tensor x,
                                          at::Tensor w, at::Tensor r, at::Tensor q, at::Tensor pre, at::Tensor post,
                                          at::Tensor m0, at::Tensor p, at::Tensor alpha, int64_t iters,
                                          std::optional<at::Tensor> gx_in, std::optional<at::Tensor> s_before,
                                          std::optional<at::Tensor> mix, std::optional<at::Tensor> write_weights,
                                          std::optional<at::Tensor> u) {
  for (auto [t, name] : {std::pair{&gh, "grad of h"}, {&gpost, "grad of post"}, {&gres, "grad of res"},
                         {&x, "streams"}, {&w, "weight"}, {&r, "inverse rms"}, {&q, "q"}, {&pre, "pre"},
                         {&post, "post"}, {&m0, "m0"}, {&p, "projection"}, {&alpha, "alpha"}})
    check(*t, name);
  if (gx_in) check(*gx_in, "grad of the streams");
  const int64_t N = x.size(0), n = x.size(1), d = x.size(2), L = n * d, nn = n * n, C = 2 * n + nn;
  const int64_t blocks = n_partials(N), chunks = (N + kLanes - 1) / kLanes;
  TORCH_CHECK(n <= kMaxStreams && w.size(0) == C && w.size(1) == L && q.numel() == N * C && p.numel() == N * C &&
                  r.numel() == N && pre.numel() == N * n && gh.numel() == N * d,
              "mHC's step backward takes streams (N, n, d), W (2n + n², n·d) and mhc_step's saved tensors");
  const auto write = write_of(s_before, mix, write_weights, u);
  auto gx = write ? at::empty({0}, x.options()) : at::empty_like(x);
  auto write_out = write_grads(write, N, n, d, x.options());
  auto gw_partial = at::empty({blocks, C, L}, x.options());
  auto weight_partial = at::zeros({chunks, C + 3}, x.options());  // each chunk's ∂bias, then its ∂α
  const auto rows = x.view({N, L});
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mhc_step_backward", [&] {
    const scalar_t *GH = gh.data_ptr<scalar_t>(), *GPOST = gpost.data_ptr<scalar_t>(), *GRES = gres.data_ptr<scalar_t>();
    const scalar_t *X = x.data_ptr<scalar_t>(), *R = r.data_ptr<scalar_t>(), *Q = q.data_ptr<scalar_t>();
    const scalar_t *PRE = pre.data_ptr<scalar_t>(), *POST = post.data_ptr<scalar_t>(), *M0 = m0.data_ptr<scalar_t>();
    const scalar_t *P = p.data_ptr<scalar_t>(), *AL = alpha.data_ptr<scalar_t>();
    const scalar_t* GX_IN = gx_in ? gx_in->data_ptr<scalar_t>() : nullptr;
    scalar_t* WPART = weight_partial.data_ptr<scalar_t>();
    const WriteBackward<scalar_t> write_backward(write, write_out, n, d);
    at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      at::Tensor scratch = write ? at::empty({kTokensPerPartial, L}, x.options()) : at::Tensor();
      at::Tensor remade = write ? at::empty({kTokensPerPartial, L}, x.options()) : at::Tensor();
      at::Tensor gq = at::empty({kTokensPerPartial, C}, x.options());
      std::vector<scalar_t> ga(kTokensPerPartial * n), gp(kTokensPerPartial * C), norm(kTokensPerPartial);
      std::vector<scalar_t> chunk(nn * kLanes), g(nn * kLanes), gs_row(write ? L : 0);
      SinkhornScratch<scalar_t> tmp(n, iters);
      scalar_t* GQ = gq.data_ptr<scalar_t>();
      for (int64_t block = first; block < last; ++block) {
        const int64_t begin = block * kTokensPerPartial, count = std::min(kTokensPerPartial, N - begin);
        // the block's rows of x; with a write, made again from the streams before it (WriteBackward::written)
        const scalar_t* XB = X + begin * L;
        if (write) {
          scalar_t* remade_rows = remade.data_ptr<scalar_t>();
          for (int64_t l = 0; l < count; ++l) write_backward.written(X, begin + l, remade_rows + l * L);
          XB = remade_rows;
        }
        const auto x_block = write ? remade.narrow(0, 0, count) : rows.narrow(0, begin, count);
        for (int64_t l = 0; l < count; ++l) dots(GH + (begin + l) * d, XB + l * L, ga.data() + l * n, n, d);
        for (int64_t start = begin; start < begin + count; start += kLanes) {
          const int64_t l = start - begin;
          scalar_t* g_bias = WPART + (start / kLanes) * (C + 3);
          mhc_weights_backward_chunk(ga.data() + l * n, GPOST + start * n, GRES + start * nn, PRE + start * n,
                                     POST + start * n, M0 + start * nn, P + start * C, AL,
                                     std::min(kLanes, begin + count - start), n, iters, tmp, chunk.data(), g.data(),
                                     gp.data() + l * C, g_bias, g_bias + C);
        }
        for (int64_t l = 0; l < count; ++l) {
          const scalar_t rt = R[begin + l];
          const scalar_t* gp_t = gp.data() + l * C;
          scalar_t total = 0;
          for (int64_t c = 0; c < C; ++c) {
            total += gp_t[c] * Q[(begin + l) * C + c];
            GQ[l * C + c] = gp_t[c] * rt;
          }
          norm[l] = total * (rt * rt * rt) * scalar_t(-1.0 / L);
        }
        const auto gq_block = gq.narrow(0, 0, count);
        auto gx_block = write ? scratch.narrow(0, 0, count) : gx.view({N, L}).narrow(0, begin, count);
        at::mm_out(gx_block, gq_block, w);
        auto gw_block = gw_partial.select(0, block);
        at::mm_out(gw_block, gq_block.t(), x_block);
        scalar_t* GX = gx_block.data_ptr<scalar_t>();
        for (int64_t l = 0; l < count; ++l) {
          const int64_t t = begin + l;
          scalar_t* gx_t = GX + l * L;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t row = t * n + j;
            add_terms(gx_t + j * d, PRE[row], GH + t * d, norm[l], XB + (l * n + j) * d,
                      GX_IN ? GX_IN + row * d : nullptr, d);
          }
          write_backward.finish(gx_t, t, gs_row.data());
        }
      }
      store_fence();
    });
  });
  auto [gm, gs, gb, gu] = write_out;
  auto weight_sums = weight_partial.sum(0);
  return {write ? gs : gx, gw_partial.sum(0), weight_sums.narrow(0, C, 3), weight_sums.narrow(0, 0, C), gm, gb, gu};
}

// ---- MGR: the gates and the attention pool over k streams laid out (k, N, d), one token at a time

// The pool of one token:  p_j = <s_j, w_α> · inv_j · scale,  π = softmax_j p,  h = Σ_j π_j s_j, for its rows s_j
// at s + j · stride (the streams are (k, N, d)); the scores in one pass over the rows, h in another. Writes h, π.
template <typename scalar_t>
void mgr_pool_token(const scalar_t* s, int64_t stride, const scalar_t* inv, const scalar_t* wa, scalar_t scale,
                    int64_t k, int64_t d, scalar_t* pi, scalar_t* h) {
  dots(wa, s, pi, k, d, stride);
  scalar_t top = -std::numeric_limits<scalar_t>::infinity();
  for (int64_t j = 0; j < k; ++j) top = std::max(top, pi[j] *= inv[j] * scale);
  scalar_t total = 0;
  for (int64_t j = 0; j < k; ++j) total += pi[j] = std::exp(pi[j] - top);
  for (int64_t j = 0; j < k; ++j) pi[j] /= total;
  set_rows(h, pi, s, k, d, scalar_t(0), static_cast<const scalar_t*>(nullptr), stride);
}

// Its backward for one token (rows s_j at s + j · stride, their gradients likewise in gs), adding into gs_j and
// ginv_j (which hold the gradients from later steps) and gwa:
//   gπ_j = <g_h, s_j>,  gp_j = π_j (gπ_j − Σ_l π_l gπ_l);  gs_j += π_j g_h + gp_j inv_j scale w_α;
//   ginv_j += gp_j <s_j, w_α> scale;  gwa += gp_j inv_j scale s_j.  π is recomputed.
template <typename scalar_t>
void mgr_pool_backward_token(const scalar_t* gh, const scalar_t* s, int64_t stride, const scalar_t* inv,
                             const scalar_t* wa, scalar_t scale, int64_t k, int64_t d, scalar_t* gs, scalar_t* ginv,
                             scalar_t* gwa) {
  scalar_t pi[kMaxStreams], score[kMaxStreams], gpi[kMaxStreams], coef[kMaxStreams];
  dots(wa, s, score, k, d, stride);
  dots(gh, s, gpi, k, d, stride);
  scalar_t top = -std::numeric_limits<scalar_t>::infinity();
  for (int64_t j = 0; j < k; ++j) top = std::max(top, pi[j] = score[j] * inv[j] * scale);
  scalar_t total = 0, mean = 0;
  for (int64_t j = 0; j < k; ++j) total += pi[j] = std::exp(pi[j] - top);
  for (int64_t j = 0; j < k; ++j) {
    pi[j] /= total;
    mean += pi[j] * gpi[j];
  }
  for (int64_t j = 0; j < k; ++j) {
    const scalar_t gp = pi[j] * (gpi[j] - mean);
    coef[j] = gp * inv[j] * scale;
    scalar_t* g = gs + j * stride;
    combine_into(g, g, pi[j], gh, coef[j], wa, d);
    ginv[j] += gp * score[j] * scale;
  }
  add_rows(gwa, coef, s, k, d, stride);
}

// Pointers to token t's row in each of k streams laid out (k, N, d).
template <typename scalar_t>
void rows_of(scalar_t* base, int64_t t, int64_t k, int64_t N, int64_t d, scalar_t** rows) {
  for (int64_t j = 0; j < k; ++j) rows[j] = base + (j * N + t) * d;
}

void check_streams(const at::Tensor& s, const at::Tensor& inv) {
  check(s, "streams");
  check(inv, "inverse rms");
  TORCH_CHECK(s.dim() == 3 && s.size(0) <= kMaxStreams && inv.numel() == s.size(0) * s.size(1),
              "MGR's streams are (k, N, d) with k <= ", kMaxStreams, " and one inverse rms per row");
}

// h for streams s (k, N, d) with inverse RMS inv (k, N).
at::Tensor mgr_pool(at::Tensor s, at::Tensor inv, at::Tensor wa, double scale) {
  check_streams(s, inv);
  check(wa, "pool query");
  const int64_t k = s.size(0), N = s.size(1), d = s.size(2);
  auto h = at::empty({N, d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "mgr_pool", [&] {
    scalar_t *S = s.data_ptr<scalar_t>(), *INV = inv.data_ptr<scalar_t>(), *WA = wa.data_ptr<scalar_t>();
    scalar_t* H = h.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      scalar_t pi[kMaxStreams], inv_t[kMaxStreams];
      for (int64_t j = 0; j < k; ++j) inv_t[j] = INV[j * N + t];
      mgr_pool_token<scalar_t>(S + t * d, N * d, inv_t, WA, scalar_t(scale), k, d, pi, H + t * d);
    });
  });
  return h;
}

// Per-block partial sums of parameter gradients (kTokensPerPartial tokens each), added in order at the end.
template <typename scalar_t, typename Fn>
void token_blocks(int64_t N, scalar_t* partial, int64_t width, const Fn& fn) {
  at::parallel_for(0, n_partials(N), 1, [&](int64_t first, int64_t last) {
    for (int64_t block = first; block < last; ++block)
      for (int64_t t = block * kTokensPerPartial; t < std::min(N, (block + 1) * kTokensPerPartial); ++t)
        fn(t, partial + block * width);
  });
}

// The gradient of mgr_pool: (gs, ginv, gwa).
std::tuple<at::Tensor, at::Tensor, at::Tensor> mgr_pool_backward(at::Tensor gh, at::Tensor s, at::Tensor inv,
                                                                 at::Tensor wa, double scale) {
  check_streams(s, inv);
  check(gh, "grad");
  check(wa, "pool query");
  const int64_t k = s.size(0), N = s.size(1), d = s.size(2);
  auto gs = at::zeros_like(s);
  auto ginv = at::zeros({k, N}, s.options());
  auto partial = at::zeros({n_partials(N), d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "mgr_pool_backward", [&] {
    scalar_t *S = s.data_ptr<scalar_t>(), *INV = inv.data_ptr<scalar_t>(), *WA = wa.data_ptr<scalar_t>();
    scalar_t *GH = gh.data_ptr<scalar_t>(), *GS = gs.data_ptr<scalar_t>(), *GINV = ginv.data_ptr<scalar_t>();
    token_blocks<scalar_t>(N, partial.data_ptr<scalar_t>(), d, [&](int64_t t, scalar_t* gwa) {
      scalar_t inv_t[kMaxStreams], ginv_t[kMaxStreams] = {};
      for (int64_t j = 0; j < k; ++j) inv_t[j] = INV[j * N + t];
      mgr_pool_backward_token<scalar_t>(GH + t * d, S + t * d, N * d, inv_t, WA, scalar_t(scale), k, d, GS + t * d,
                                        ginv_t, gwa);
      for (int64_t j = 0; j < k; ++j) GINV[j * N + t] = ginv_t[j];
    });
  });
  return {gs, ginv, partial.sum(0)};
}

// A gated step and its pool:  β_j = σ(<s_j, w_β> inv_j scale + b_j),  s'_j = s_j + β_j (u − s_j),
// inv'_j = rms(s'_j)^{-1},  h = pool(s', inv'). Returns (s', inv', h).
std::tuple<at::Tensor, at::Tensor, at::Tensor> mgr_gate_pool(at::Tensor s, at::Tensor inv, at::Tensor u,
                                                             at::Tensor wb, at::Tensor bias, at::Tensor wa,
                                                             double scale, double eps) {
  check_streams(s, inv);
  for (auto [t, name] : {std::pair{&u, "u"}, {&wb, "gate query"}, {&bias, "gate bias"}, {&wa, "pool query"}})
    check(*t, name);
  const int64_t k = s.size(0), N = s.size(1), d = s.size(2);
  auto out = at::empty_like(s);
  auto inv_out = at::empty({k, N}, s.options());
  auto h = at::empty({N, d}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "mgr_gate_pool", [&] {
    scalar_t *S = s.data_ptr<scalar_t>(), *INV = inv.data_ptr<scalar_t>(), *U = u.data_ptr<scalar_t>();
    scalar_t *WB = wb.data_ptr<scalar_t>(), *BI = bias.data_ptr<scalar_t>(), *WA = wa.data_ptr<scalar_t>();
    scalar_t *O = out.data_ptr<scalar_t>(), *IO = inv_out.data_ptr<scalar_t>(), *H = h.data_ptr<scalar_t>();
    const scalar_t sc = scale;
    each_token(N, [&](int64_t t) {
      scalar_t pi[kMaxStreams], inv_t[kMaxStreams], score[kMaxStreams];
      const scalar_t *s_t = S + t * d, *ut = U + t * d;
      scalar_t* o_t = O + t * d;
      dots(WB, s_t, score, k, d, N * d);  // the gates' scores in one pass over the token's rows
      for (int64_t j = 0; j < k; ++j) {
        const scalar_t beta = sigmoid(score[j] * INV[j * N + t] * sc + BI[j]);
        const scalar_t squares = lerp(o_t + j * N * d, s_t + j * N * d, beta, ut, d);
        inv_t[j] = IO[j * N + t] = scalar_t(1) / std::sqrt(squares / scalar_t(d) + scalar_t(eps));
      }
      mgr_pool_token<scalar_t>(o_t, N * d, inv_t, WA, sc, k, d, pi, H + t * d);
    });
  });
  return {out, inv_out, h};
}

// The gradient of mgr_gate_pool, given the gradients of its three outputs: (gs, ginv, gu, gwb, gbias, gwa).
//   the pool's backward at (s', inv') adds to gs' and ginv';  the norm: gs'_j += ginv'_j (−inv'_j³/d) s'_j;
//   the gate: gβ_j = <gs'_j, u − s_j>,  gz_j = gβ_j β_j (1 − β_j);  gs_j = (1 − β_j) gs'_j + gz_j inv_j scale w_β;
//   gu = Σ_j β_j gs'_j;  ginv_j = gz_j <s_j, w_β> scale;  gwb = Σ gz_j inv_j scale s_j;  gbias_j = Σ gz_j.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> mgr_gate_pool_backward(
    at::Tensor gout, at::Tensor ginv_out, at::Tensor gh, at::Tensor s, at::Tensor inv, at::Tensor u, at::Tensor wb,
    at::Tensor bias, at::Tensor wa, at::Tensor out, at::Tensor inv_out, double scale) {
  check_streams(s, inv);
  for (auto [t, name] : {std::pair{&gout, "grad of the streams"}, {&ginv_out, "grad of the inverse rms"},
                         {&gh, "grad of h"}, {&u, "u"}, {&wb, "gate query"}, {&bias, "gate bias"},
                         {&wa, "pool query"}, {&out, "streams out"}, {&inv_out, "inverse rms out"}})
    check(*t, name);
  const int64_t k = s.size(0), N = s.size(1), d = s.size(2), width = 2 * d + k;
  auto gs = at::empty_like(s);
  auto ginv = at::empty({k, N}, s.options());
  auto gu = at::empty({N, d}, s.options());
  auto partial = at::zeros({n_partials(N), width}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "mgr_gate_pool_backward", [&] {
    scalar_t *S = s.data_ptr<scalar_t>(), *INV = inv.data_ptr<scalar_t>(), *U = u.data_ptr<scalar_t>();
    scalar_t *WB = wb.data_ptr<scalar_t>(), *BI = bias.data_ptr<scalar_t>(), *WA = wa.data_ptr<scalar_t>();
    scalar_t *O = out.data_ptr<scalar_t>(), *IO = inv_out.data_ptr<scalar_t>(), *GH = gh.data_ptr<scalar_t>();
    scalar_t *GO = gout.data_ptr<scalar_t>(), *GIO = ginv_out.data_ptr<scalar_t>();
    scalar_t *GS = gs.data_ptr<scalar_t>(), *GINV = ginv.data_ptr<scalar_t>(), *GU = gu.data_ptr<scalar_t>();
    const scalar_t sc = scale;
    token_blocks<scalar_t>(N, partial.data_ptr<scalar_t>(), width, [&](int64_t t, scalar_t* gparams) {
      scalar_t *gwb = gparams, *gwa = gparams + d, *gbias = gparams + 2 * d;
      scalar_t *rows[kMaxStreams], *orows[kMaxStreams], *grows[kMaxStreams], *gorows[kMaxStreams];
      scalar_t inv_t[kMaxStreams], ginv_t[kMaxStreams];
      rows_of(S, t, k, N, d, rows);
      rows_of(O, t, k, N, d, orows);
      rows_of(GS, t, k, N, d, grows);
      rows_of(GO, t, k, N, d, gorows);
      // gs' starts as the incoming gradient, in gs's rows (overwritten by gs below, row by row)
      for (int64_t j = 0; j < k; ++j) {
        std::copy(gorows[j], gorows[j] + d, grows[j]);
        inv_t[j] = IO[j * N + t];
        ginv_t[j] = GIO[j * N + t];
      }
      mgr_pool_backward_token<scalar_t>(GH + t * d, orows[0], N * d, inv_t, WA, sc, k, d, grows[0], ginv_t, gwa);
      const scalar_t* ut = U + t * d;
      scalar_t* gut = GU + t * d;
      std::fill(gut, gut + d, scalar_t(0));
      scalar_t q[kMaxStreams], coef[kMaxStreams];
      dots(WB, rows[0], q, k, d, N * d);  // the gates' scores, in one pass over the token's rows
      for (int64_t j = 0; j < k; ++j) {
        scalar_t* g = grows[j];  // gs'_j
        axpy(g, -ginv_t[j] * inv_t[j] * inv_t[j] * inv_t[j] / scalar_t(d), orows[j], d);
        const scalar_t inv_j = INV[j * N + t];
        const scalar_t beta = sigmoid(q[j] * inv_j * sc + BI[j]);
        const scalar_t gbeta = dot_difference(g, ut, rows[j], d);
        const scalar_t gz = gbeta * beta * (scalar_t(1) - beta);
        axpy(gut, beta, g, d);
        coef[j] = gz * inv_j * sc;
        combine(g, scalar_t(1) - beta, g, coef[j], WB, d);
        GINV[j * N + t] = gz * q[j] * sc;
        gbias[j] += gz;
      }
      add_rows(gwb, coef, rows[0], k, d, N * d);  // gwb += Σ_j gz_j inv_j scale s_j
    });
  });
  auto sums = partial.sum(0);
  return {gs, ginv, gu, sums.narrow(0, 0, d), sums.narrow(0, 2 * d, k), sums.narrow(0, d, d)};
}

// Review's norms' backward row and the gate's backward (#pragma cannot sit in a macro's arguments, so the loops
// live here, outside AT_DISPATCH)
// out = in (⊙ gate, where given) + r (g − y · mean)
template <typename scalar_t>
void norm_backward_row(scalar_t* out, const scalar_t* in, const scalar_t* gate, const scalar_t* g, const scalar_t* y,
                       scalar_t r, scalar_t mean, int64_t d) {
  if (gate == nullptr) {
#pragma omp simd
    for (int64_t c = 0; c < d; ++c) out[c] = in[c] + r * (g[c] - y[c] * mean);
  } else {
#pragma omp simd
    for (int64_t c = 0; c < d; ++c) out[c] = in[c] * gate[c] + r * (g[c] - y[c] * mean);
  }
}

template <typename scalar_t>
void gate_backward_rows(scalar_t* gz, const scalar_t* g, const scalar_t* u, const scalar_t* r, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) gz[i] = g[i] * u[i] * r[i] * (scalar_t(1) - r[i]);
}

// Review's gate input (rrlib.rules.review_gate): per token, the two RMS-normalised rows [h r_h, u r_u] side by side,
// (N, 2d), and r_h, r_u, (N, 2): one pass over h and u where ATen's norms and concatenation made seven
std::tuple<at::Tensor, at::Tensor> review_norms(at::Tensor h, at::Tensor u, double eps) {
  check(h, "h");
  check(u, "u");
  const int64_t N = h.size(0), d = h.size(1);
  auto x = at::empty({N, 2 * d}, h.options());
  auto inv = at::empty({N, 2}, h.options());
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "review_norms", [&] {
    const scalar_t* sources[2] = {h.data_ptr<scalar_t>(), u.data_ptr<scalar_t>()};
    scalar_t* X = x.data_ptr<scalar_t>();
    scalar_t* R = inv.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      for (int side = 0; side < 2; ++side) {
        const scalar_t* src = sources[side] + t * d;
        const scalar_t r = scalar_t(1) / std::sqrt(dot(src, src, d) / scalar_t(d) + scalar_t(eps));
        R[2 * t + side] = r;
        scale(X + t * 2 * d + side * d, r, src, d);
      }
    });
  });
  return {x, inv};
}

// The gate's pre-activation gradient, ∂z = g ⊙ u ⊙ r (1 − r) (h' = h + r ⊙ u, r = σ(z)), in one pass
at::Tensor review_gate_backward(at::Tensor grad, at::Tensor u, at::Tensor r) {
  check(grad, "grad");
  check(u, "u");
  check(r, "r");
  auto gz = at::empty_like(r);
  AT_DISPATCH_FLOATING_TYPES(r.scalar_type(), "review_gate_backward", [&] {
    gate_backward_rows(gz.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(),
                       r.data_ptr<scalar_t>(), r.numel());
  });
  return gz;
}

// ∂h and ∂u: what the sum and the product give them (g, and g ⊙ r) plus the norms' backward, per token and side
// ∂x = r_x (g_x − y mean_c(g_x ⊙ y)) with y the normalised row and g_x its gradient: one pass
std::tuple<at::Tensor, at::Tensor> review_norms_backward(at::Tensor grad_x, at::Tensor x, at::Tensor inv,
                                                         at::Tensor grad, at::Tensor r) {
  check(grad_x, "grad_x");
  check(x, "x");
  check(inv, "inverse_rms");
  check(grad, "grad");
  check(r, "r");
  const int64_t N = grad.size(0), d = grad.size(1);
  auto gh = at::empty_like(grad), gu = at::empty_like(grad);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "review_norms_backward", [&] {
    const scalar_t* GX = grad_x.data_ptr<scalar_t>();
    const scalar_t* X = x.data_ptr<scalar_t>();
    const scalar_t* R = inv.data_ptr<scalar_t>();
    const scalar_t* G = grad.data_ptr<scalar_t>();
    const scalar_t* GATE = r.data_ptr<scalar_t>();
    scalar_t* outgoing[2] = {gh.data_ptr<scalar_t>(), gu.data_ptr<scalar_t>()};
    each_token(N, [&](int64_t t) {
      for (int side = 0; side < 2; ++side) {
        const scalar_t* g = GX + t * 2 * d + side * d;
        const scalar_t* y = X + t * 2 * d + side * d;
        const scalar_t mean = dot(g, y, d) / scalar_t(d);
        norm_backward_row(outgoing[side] + t * d, G + t * d, side ? GATE + t * d : nullptr, g, y, R[2 * t + side],
                          mean, d);
      }
    });
  });
  return {gh, gu};
}

// The AttnRes family's weighted sum over depth (rrlib.rules.depth_mixing.attention.depth_mix): out[t] = Σ_s w[t, s]
// v_s[t] for S sources (N, d), token by token, so that out's row stays in cache while each source is read once,
// where one multiply-add per source made S passes over out
at::Tensor depth_mix(at::Tensor w, std::vector<at::Tensor> values) {
  check(w, "weights");
  for (const auto& v : values) check(v, "values");
  const int64_t N = w.size(0), S = w.size(1), d = values[0].size(1);
  auto out = at::empty({N, d}, values[0].options());
  AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "depth_mix", [&] {
    std::vector<const scalar_t*> V;
    for (const auto& v : values) V.push_back(v.data_ptr<scalar_t>());
    const scalar_t* W = w.data_ptr<scalar_t>();
    scalar_t* O = out.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      scale(O + t * d, W[t * S], V[0] + t * d, d);
      for (int64_t s = 1; s < S; ++s) axpy(O + t * d, W[t * S + s], V[s] + t * d, d);
    });
  });
  return out;
}

// ∂w[t, s] = <g[t], v_s[t]>, ∂v_s[t] = w[t, s] g[t]: g's row read once per token for all S sources
std::tuple<at::Tensor, std::vector<at::Tensor>> depth_mix_backward(at::Tensor g, at::Tensor w,
                                                                    std::vector<at::Tensor> values) {
  check(g, "grad");
  check(w, "weights");
  for (const auto& v : values) check(v, "values");
  const int64_t N = w.size(0), S = w.size(1), d = g.size(1);
  auto gw = at::empty_like(w);
  std::vector<at::Tensor> gv;
  for (int64_t s = 0; s < S; ++s) gv.push_back(at::empty_like(g));
  AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "depth_mix_backward", [&] {
    std::vector<const scalar_t*> V;
    std::vector<scalar_t*> GV;
    for (int64_t s = 0; s < S; ++s) {
      V.push_back(values[s].data_ptr<scalar_t>());
      GV.push_back(gv[s].data_ptr<scalar_t>());
    }
    const scalar_t* G = g.data_ptr<scalar_t>();
    const scalar_t* W = w.data_ptr<scalar_t>();
    scalar_t* GW = gw.data_ptr<scalar_t>();
    each_token(N, [&](int64_t t) {
      for (int64_t s = 0; s < S; ++s) {
        GW[t * S + s] = dot(G + t * d, V[s] + t * d, d);
        scale(GV[s] + t * d, W[t * S + s], G + t * d, d);
      }
    });
  });
  return {gw, gv};
}

}  // namespace

// Registered as operators (torch.ops.rrlib_native.*), so that the dispatcher sees them: rrlib.speed.memory's tracker
// counts the tensors they return like any other operator's.
TORCH_LIBRARY(rrlib_native, m) {
  m.def("stream_read(Tensor weights, Tensor streams) -> Tensor");
  m.def("stream_read_backward(Tensor grad, Tensor weights, Tensor streams) -> (Tensor, Tensor)");
  m.def("stream_write(Tensor mix, Tensor streams, Tensor write, Tensor u) -> Tensor");
  m.def("stream_write_backward(Tensor grad, Tensor mix, Tensor streams, Tensor write, Tensor u)"
        " -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("inverse_rms(Tensor x, float eps) -> Tensor");
  m.def("review_norms(Tensor h, Tensor u, float eps) -> (Tensor, Tensor)");
  m.def("review_norms_backward(Tensor grad_x, Tensor x, Tensor inverse_rms, Tensor grad, Tensor r)"
        " -> (Tensor, Tensor)");
  m.def("review_gate_backward(Tensor grad, Tensor u, Tensor r) -> Tensor");
  m.def("depth_mix(Tensor weights, Tensor[] values) -> Tensor");
  m.def("depth_mix_backward(Tensor grad, Tensor weights, Tensor[] values) -> (Tensor, Tensor[])");
  m.def("sinkhorn(Tensor m, int iters) -> Tensor");
  m.def("sinkhorn_backward(Tensor grad, Tensor m, int iters) -> Tensor");
  m.def("mgr_pool(Tensor streams, Tensor inverse_rms, Tensor pool_query, float scale) -> Tensor");
  m.def("mgr_pool_backward(Tensor grad, Tensor streams, Tensor inverse_rms, Tensor pool_query, float scale)"
        " -> (Tensor, Tensor, Tensor)");
  m.def("mgr_gate_pool(Tensor streams, Tensor inverse_rms, Tensor u, Tensor gate_query, Tensor gate_bias,"
        " Tensor pool_query, float scale, float eps) -> (Tensor, Tensor, Tensor)");
  m.def("mgr_gate_pool_backward(Tensor grad_streams, Tensor grad_inverse_rms, Tensor grad_h, Tensor streams,"
        " Tensor inverse_rms, Tensor u, Tensor gate_query, Tensor gate_bias, Tensor pool_query, Tensor streams_out,"
        " Tensor inverse_rms_out, float scale) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("hc_step(Tensor streams, Tensor? mix, Tensor? write, Tensor? u, Tensor weight, Tensor static,"
        " Tensor scales, float eps) -> Tensor[]");
  m.def("hc_step_backward(Tensor grad_h, Tensor grad_b, Tensor grad_mix, Tensor streams, Tensor a,"
        " Tensor inverse_rms, Tensor q, Tensor tanh, Tensor weight, Tensor scales, Tensor? grad_streams,"
        " Tensor? streams_before, Tensor? mix, Tensor? write, Tensor? u)"
        " -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("mhc_step(Tensor streams, Tensor? mix, Tensor? write, Tensor? u, Tensor weight, Tensor alpha, Tensor bias,"
        " int iters, float eps) -> Tensor[]");
  m.def("mhc_step_backward(Tensor grad_h, Tensor grad_post, Tensor grad_res, Tensor streams, Tensor weight,"
        " Tensor inverse_rms, Tensor q, Tensor pre, Tensor post, Tensor m0, Tensor projection, Tensor alpha,"
        " int iters, Tensor? grad_streams, Tensor? streams_before, Tensor? mix, Tensor? write, Tensor? u)"
        " -> Tensor[]");
}

TORCH_LIBRARY_IMPL(rrlib_native, CPU, m) {
  m.impl("stream_read", &stream_read);
  m.impl("stream_read_backward", &stream_read_backward);
  m.impl("stream_write", &stream_write);
  m.impl("stream_write_backward", &stream_write_backward);
  m.impl("inverse_rms", &inverse_rms);
  m.impl("review_norms", &review_norms);
  m.impl("review_norms_backward", &review_norms_backward);
  m.impl("review_gate_backward", &review_gate_backward);
  m.impl("depth_mix", &depth_mix);
  m.impl("depth_mix_backward", &depth_mix_backward);
  m.impl("sinkhorn", &sinkhorn);
  m.impl("sinkhorn_backward", &sinkhorn_backward);
  m.impl("mgr_pool", &mgr_pool);
  m.impl("mgr_pool_backward", &mgr_pool_backward);
  m.impl("mgr_gate_pool", &mgr_gate_pool);
  m.impl("mgr_gate_pool_backward", &mgr_gate_pool_backward);
  m.impl("hc_step", &hc_step);
  m.impl("hc_step_backward", &hc_step_backward);
  m.impl("mhc_step", &mhc_step);
  m.impl("mhc_step_backward", &mhc_step_backward);
}
