// Half-open nanosecond intervals and the set algebra the attribution needs.
// A "set" is a vector of disjoint intervals sorted by start (normalize()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analyzer {

struct Iv {
  int64_t a = 0, b = 0;  // [a, b)
  int64_t len() const noexcept { return b > a ? b - a : 0; }
};
using Ivs = std::vector<Iv>;

// Appends [a, b), written in place. A braced temporary handed to an
// outlined push_back is stored as two 8-byte halves and reloaded as one
// 16-byte value, which store-to-load forwarding cannot serve: a stall of
// ~15 cycles per interval on the paths that add one per event.
inline void append(Ivs& v, int64_t a, int64_t b) {
  Iv& x = v.emplace_back();
  x.a = a;
  x.b = b;
}

// Sorts [first, first + n) by start, for input made of a few ascending
// runs: the runs are found and merged pairwise through `scratch`, O(n log
// runs), O(n) when already sorted; a plain sort when not run-shaped.
void sort_by_start_runs(Iv* first, size_t n, std::vector<Iv>& scratch, std::vector<size_t>& cuts);
// Sorts and merges overlapping or touching intervals; drops empty ones.
void normalize(Ivs& v);
int64_t length(const Ivs& v) noexcept;
// out = x ∪ y, x − y, x ∩ y (inputs normalized; out normalized; out may not alias).
void unite(const Ivs& x, const Ivs& y, Ivs& out);
void subtract(const Ivs& x, const Ivs& y, Ivs& out);
void intersect(const Ivs& x, const Ivs& y, Ivs& out);
// Length of x ∩ [a, b).
int64_t overlap(const Ivs& x, int64_t a, int64_t b) noexcept;

}  // namespace stallscope::analyzer
