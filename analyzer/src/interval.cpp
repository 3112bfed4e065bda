#include "interval.hpp"

#include <algorithm>

namespace stallscope::analyzer {

void sort_by_start_runs(Iv* first, size_t n, std::vector<Iv>& scratch, std::vector<size_t>& cuts) {
  constexpr auto by_start = [](const Iv& l, const Iv& r) { return l.a < r.a; };
  cuts.assign(1, 0);  // run boundaries, relative to `first`
  for (size_t i = 1; i < n; ++i)
    if (first[i].a < first[i - 1].a) cuts.push_back(i);
  cuts.push_back(n);
  if (cuts.size() <= 2) return;
  if (cuts.size() * 16 > n) {  // not run-shaped: a plain sort is cheaper
    std::sort(first, first + n, by_start);
    return;
  }
  scratch.resize(n);
  Iv* src = first;
  Iv* dst = scratch.data();
  while (cuts.size() > 2) {
    size_t out = 1;
    for (size_t i = 0; i + 1 < cuts.size(); i += 2) {
      const size_t a = cuts[i], m = cuts[i + 1], b = i + 2 < cuts.size() ? cuts[i + 2] : m;
      std::merge(src + a, src + m, src + m, src + b, dst + a, by_start);
      cuts[out++] = b;
    }
    cuts.resize(out);
    std::swap(src, dst);
  }
  if (src != first) std::copy(src, src + n, first);
}

void normalize(Ivs& v) {
  // Most sets arrive sorted (Channel::take): checking is O(n), sorting is not.
  const auto by_start = [](const Iv& l, const Iv& r) { return l.a < r.a; };
  if (!std::is_sorted(v.begin(), v.end(), by_start)) std::sort(v.begin(), v.end(), by_start);
  size_t n = 0;
  for (const Iv& x : v) {
    if (x.b <= x.a) continue;
    if (n > 0 && x.a <= v[n - 1].b) {
      v[n - 1].b = std::max(v[n - 1].b, x.b);
    } else {
      v[n++] = x;
    }
  }
  v.resize(n);
}

int64_t length(const Ivs& v) noexcept {
  int64_t s = 0;
  for (const Iv& x : v) s += x.len();
  return s;
}

void unite(const Ivs& x, const Ivs& y, Ivs& out) {
  out.clear();
  out.reserve(x.size() + y.size());
  std::merge(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out),
             [](const Iv& l, const Iv& r) { return l.a < r.a; });
  size_t n = 0;
  for (const Iv& v : out) {
    if (n > 0 && v.a <= out[n - 1].b) {
      out[n - 1].b = std::max(out[n - 1].b, v.b);
    } else {
      out[n++] = v;
    }
  }
  out.resize(n);
}

void subtract(const Ivs& x, const Ivs& y, Ivs& out) {
  out.clear();
  out.reserve(x.size() + y.size());  // the most pieces there can be: one growth instead of many
  size_t j = 0;
  for (const Iv& v : x) {
    int64_t a = v.a;
    while (j < y.size() && y[j].b <= a) ++j;
    size_t k = j;
    while (k < y.size() && y[k].a < v.b) {
      if (y[k].a > a) append(out, a, y[k].a);
      a = std::max(a, y[k].b);
      if (a >= v.b) break;
      ++k;
    }
    if (a < v.b) append(out, a, v.b);
  }
}

void intersect(const Ivs& x, const Ivs& y, Ivs& out) {
  out.clear();
  out.reserve(x.size() + y.size());
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const int64_t a = std::max(x[i].a, y[j].a), b = std::min(x[i].b, y[j].b);
    if (a < b) append(out, a, b);
    if (x[i].b < y[j].b) ++i; else ++j;
  }
}

int64_t overlap(const Ivs& x, int64_t a, int64_t b) noexcept {
  int64_t s = 0;
  for (const Iv& v : x) {
    if (v.a >= b) break;
    s += Iv{std::max(a, v.a), std::min(b, v.b)}.len();
  }
  return s;
}

}  // namespace stallscope::analyzer
