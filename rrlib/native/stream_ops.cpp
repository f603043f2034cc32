// CPU kernels for the multi-stream rules (HC, mHC): per-token contractions over n streams of d channels, the
// inverse RMS, and Sinkhorn's normalisations. Each loops over tokens and does all of one token's work while
// its n × d values are in cache. In ATen the same work is several passes over the streams: linalg.vecdot
// materialises the product before summing, and bmm makes one small matrix product per token.
//
// Every function takes contiguous tensors, flattened by the caller to (tokens, ...), in float32 or float64,
// and computes the same formula as the PyTorch path in rrlib/depth_mixing.py (tests/test_native.py compares
// them, forward and backward, in float64).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <tuple>
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

// p[c] = <x, W_c> for the k rows of W (k × len), four rows per pass over x: x is loaded once for four
// independent sums, where one dot() per row made a pass and a horizontal sum each (2× slower at n = 4)
template <typename scalar_t>
void dots(const scalar_t* x, const scalar_t* w, scalar_t* p, int64_t k, int64_t len) {
  int64_t c = 0;
  for (; c + 4 <= k; c += 4) {
    const scalar_t *w0 = w + c * len, *w1 = w0 + len, *w2 = w1 + len, *w3 = w2 + len;
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
  for (; c < k; ++c) p[c] = dot(x, w + c * len, len);
}

// y += Σ_c alpha[c] W_c over the k rows of W, four rows per pass over y
template <typename scalar_t>
void add_rows(scalar_t* y, const scalar_t* alpha, const scalar_t* w, int64_t k, int64_t len) {
  int64_t c = 0;
  for (; c + 4 <= k; c += 4) {
    const scalar_t *w0 = w + c * len, *w1 = w0 + len, *w2 = w1 + len, *w3 = w2 + len;
    const scalar_t b0 = alpha[c], b1 = alpha[c + 1], b2 = alpha[c + 2], b3 = alpha[c + 3];
#pragma omp simd
    for (int64_t e = 0; e < len; ++e) y[e] += b0 * w0[e] + b1 * w1[e] + b2 * w2[e] + b3 * w3[e];
  }
  for (; c < k; ++c) axpy(y, alpha[c], w + c * len, len);
}

// out[t, :] = Σ_j w[t, j] s[t, j, :]
template <typename scalar_t>
void read_token(const scalar_t* w, const scalar_t* s, scalar_t* out, int64_t n, int64_t d) {
  std::fill(out, out + d, scalar_t(0));
  add_rows(out, w, s, n, d);
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
  for (int64_t i = 0; i < n; ++i) {
    scale(out + i * d, b[i], u, d);
    add_rows(out + i * d, m + i * n, s, n, d);
  }
}

// gM[t, i, j] = <g[t, i], s[t, j]>,  gs[t, j] = Σ_i M[t, i, j] g[t, i],  gb[t, i] = <g[t, i], u[t]>,
// gu[t] = Σ_i b[t, i] g[t, i]
template <typename scalar_t>
void write_backward_token(const scalar_t* g, const scalar_t* m, const scalar_t* s, const scalar_t* b,
                          const scalar_t* u, scalar_t* gm, scalar_t* gs, scalar_t* gb, scalar_t* gu, int64_t n,
                          int64_t d) {
  for (int64_t i = 0; i < n; ++i) dots(g + i * d, s, gm + i * n, n, d);
  dots(u, g, gb, n, d);
  std::fill(gu, gu + d, scalar_t(0));
  add_rows(gu, b, g, n, d);
  scalar_t column[kMaxStreams];
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < n; ++i) column[i] = m[i * n + j];
    std::fill(gs + j * d, gs + (j + 1) * d, scalar_t(0));
    add_rows(gs + j * d, column, g, n, d);
  }
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
    each_token(N, [&](int64_t t) {
      R[t] = scalar_t(1) / std::sqrt(dot(X + t * d, X + t * d, d) / scalar_t(d) + scalar_t(eps));
    });
  });
  return r;
}

// Sinkhorn runs on chunks of kLanes tokens laid out (n·n, kLanes): every sum and division is then a loop over
// the chunk's tokens, which the compiler vectorises, where a loop over one token's n values would not be.
constexpr int64_t kLanes = 64;

// `iters` rounds of: divide each column by its sum, then each row by its sum, on the chunk `m` (entry (i, j) of
// lane l at m[(i * n + j) * kLanes + l]). With `trace`, every iterate after a division (2·iters of them) and
// every sum (2·iters × n × kLanes) is kept for the backward pass.
template <typename scalar_t>
void sinkhorn_chunk(scalar_t* m, int64_t n, int64_t iters, scalar_t* trace, scalar_t* sums) {
  const int64_t nn = n * n;
  std::vector<scalar_t> local(n * kLanes);
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
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          scalar_t* entry = m + (i * n + j) * kLanes;
          const scalar_t* total = sum + (axis == 0 ? j : i) * kLanes;
          for (int64_t l = 0; l < kLanes; ++l) entry[l] /= total[l];
        }
      if (trace) std::copy(m, m + nn * kLanes, trace + step * nn * kLanes);
    }
  }
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
        sinkhorn_chunk<scalar_t>(chunk.data(), n, iters, nullptr, nullptr);
        scatter(chunk.data(), begin, count, nn, O);
      }
    });
  });
  return out;
}

// The gradient of sinkhorn(m0) with respect to m0. The iterates are recomputed chunk by chunk (cheap next to
// keeping 2·iters copies of the matrices from the forward pass). Backward of one division y = m / s, s the
// sum over the axis:  dm = (dy − Σ_axis(dy · y)) / s.
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
      std::vector<scalar_t> chunk(nn * kLanes), g(nn * kLanes), dots(n * kLanes);
      std::vector<scalar_t> trace(2 * iters * nn * kLanes), sums(2 * iters * n * kLanes);
      for (int64_t c = first; c < last; ++c) {
        const int64_t begin = c * kLanes, count = std::min(kLanes, N - begin);
        gather(M0, begin, count, nn, chunk.data());
        sinkhorn_chunk<scalar_t>(chunk.data(), n, iters, trace.data(), sums.data());
        gather(G, begin, count, nn, g.data());
        for (int64_t step = 2 * iters - 1; step >= 0; --step) {
          const int axis = step % 2;
          const scalar_t* y = trace.data() + step * nn * kLanes;
          const scalar_t* s = sums.data() + step * n * kLanes;
          for (int64_t a = 0; a < n; ++a) {
            scalar_t* dot = dots.data() + a * kLanes;
            for (int64_t l = 0; l < kLanes; ++l) dot[l] = 0;
            for (int64_t b = 0; b < n; ++b) {
              const int64_t e = (axis == 0 ? b * n + a : a * n + b) * kLanes;
              for (int64_t l = 0; l < kLanes; ++l) dot[l] += g[e + l] * y[e + l];
            }
          }
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
              const int64_t a = (axis == 0 ? j : i) * kLanes;
              scalar_t* ge = g.data() + (i * n + j) * kLanes;
              for (int64_t l = 0; l < kLanes; ++l) ge[l] = (ge[l] - dots[a + l]) / s[a + l];
            }
        }
        scatter(g.data(), begin, count, nn, O);
      }
    });
  });
  return out;
}

}  // namespace

// Registered as operators (torch.ops.rrlib_native.*), so that the dispatcher sees them: rrlib.memory's tracker
// counts the tensors they return like any other operator's.
TORCH_LIBRARY(rrlib_native, m) {
  m.def("stream_read(Tensor weights, Tensor streams) -> Tensor");
  m.def("stream_read_backward(Tensor grad, Tensor weights, Tensor streams) -> (Tensor, Tensor)");
  m.def("stream_write(Tensor mix, Tensor streams, Tensor write, Tensor u) -> Tensor");
  m.def("stream_write_backward(Tensor grad, Tensor mix, Tensor streams, Tensor write, Tensor u)"
        " -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("inverse_rms(Tensor x, float eps) -> Tensor");
  m.def("sinkhorn(Tensor m, int iters) -> Tensor");
  m.def("sinkhorn_backward(Tensor grad, Tensor m, int iters) -> Tensor");
}

TORCH_LIBRARY_IMPL(rrlib_native, CPU, m) {
  m.impl("stream_read", &stream_read);
  m.impl("stream_read_backward", &stream_read_backward);
  m.impl("stream_write", &stream_write);
  m.impl("stream_write_backward", &stream_write_backward);
  m.impl("inverse_rms", &inverse_rms);
  m.impl("sinkhorn", &sinkhorn);
  m.impl("sinkhorn_backward", &sinkhorn_backward);
}
