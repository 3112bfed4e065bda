// White-box tests of the engine's window structures (analyzer/src): the
// sample-head map with O(1) clear, and the sample index whose two
// generations of heads rotate as the window slides. Checked against plain
// std::map models on the same operations.
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <vector>

#include "channels.hpp"
#include "flat_map.hpp"
#include "lineage.hpp"

using stallscope::analyzer::FlatMap64;
using stallscope::analyzer::SampleIndex;
using stallscope::analyzer::Iv;
using stallscope::analyzer::Ivs;
using stallscope::analyzer::LaneChannel;
using stallscope::analyzer::Lineage;
using stallscope::analyzer::Ev;
using stallscope::analyzer::Kind;

BOOST_AUTO_TEST_CASE(flat_map_matches_a_map_through_growth_and_clears) {
  FlatMap64 m;
  std::map<uint64_t, uint64_t> model;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 40; ++round) {
    // Consecutive runs (like sample ids) and scattered keys, some repeated.
    const uint64_t base = rng() % 1'000'000 + 1;
    for (uint64_t k = 0; k < 3000; ++k) {
      const uint64_t key = (k % 3 == 0) ? (rng() % 5'000'000) + 1 : base + k;
      const uint64_t value = rng() & ((uint64_t{1} << 48) - 1);
      auto it = model.find(key);
      const uint64_t expect_old = it == model.end() ? FlatMap64::kAbsent : it->second;
      BOOST_TEST(m.exchange(key, value) == expect_old);
      model[key] = value;
    }
    BOOST_TEST(m.size() == model.size());
    for (const auto& [k, v] : model) BOOST_TEST(m.get(k) == v);
    BOOST_TEST(m.get(base + 5'000'000) == FlatMap64::kAbsent);
    if (round % 3 == 2) {  // a cleared table forgets everything, keeps working
      m.clear();
      for (const auto& [k, v] : model) BOOST_TEST(m.get(k) == FlatMap64::kAbsent);
      model.clear();
      BOOST_TEST(m.size() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(flat_map_survives_epoch_wraparound) {
  FlatMap64 m;
  m.reset(16);
  for (uint64_t i = 0; i < 70'000; ++i) {  // past the 16-bit epoch: slots are wiped for real
    BOOST_TEST_REQUIRE(m.get(i + 1) == FlatMap64::kAbsent);
    BOOST_TEST_REQUIRE(m.exchange(i + 1, i) == FlatMap64::kAbsent);
    BOOST_TEST_REQUIRE(m.exchange(i + 1, i + 7) == i);
    // A key written in an earlier epoch at the same slot is gone.
    if (i > 0) BOOST_TEST_REQUIRE(m.get(i) == FlatMap64::kAbsent);
    m.clear();
  }
}

namespace {

// Items of the index, newest first, as for_each() reports them.
std::vector<uint64_t> items_of(const SampleIndex& ix, uint64_t sample, uint64_t base) {
  std::vector<uint64_t> out;
  ix.for_each(sample, base, [&](uint64_t item) { out.push_back(item); });
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sample_index_keeps_every_live_item_across_generations) {
  // A sliding window: item i reads sample s(i); items older than the
  // window are evicted. Samples repeat (epochs over a small dataset) and
  // arrive interleaved, as from several workers.
  SampleIndex ix;
  std::map<uint64_t, std::vector<uint64_t>> model;  // sample -> items, oldest first
  constexpr uint64_t kWindow = 20'000, kItems = 300'000, kDataset = 50'000;
  uint64_t base = 0;
  for (uint64_t item = 0; item < kItems; ++item) {
    const uint64_t sample = 1 + (item * 7919) % kDataset;
    ix.add(sample, item);
    model[sample].push_back(item);
    if (item >= kWindow && item % 1000 == 0) {
      base = item - kWindow;
      ix.evict(base);
    }
    if (item % 9973 == 0) {
      for (uint64_t s : {sample, 1 + ((item + 17) * 7919) % kDataset, kDataset + 5}) {
        std::vector<uint64_t> expect;
        for (auto it = model[s].rbegin(); it != model[s].rend() && *it >= base; ++it) expect.push_back(*it);
        BOOST_TEST(items_of(ix, s, base) == expect, "sample " << s << " at item " << item);
      }
    }
  }
  BOOST_TEST(ix.size() <= kWindow + 1000);
}

// Links added out of item order (a group's later samples are indexed when
// its batch arrives): eviction drops exactly the prefix of links below the
// base, as a FIFO does, whether or not such links are still in the ring.
BOOST_AUTO_TEST_CASE(sample_index_evicts_a_fifo_prefix_with_links_out_of_item_order) {
  SampleIndex ix;
  struct L {
    uint64_t sample, item;
  };
  std::vector<L> fifo;  // the links, in the order added
  std::mt19937_64 rng(11);
  uint64_t next_item = 1, base = 0;
  for (int round = 0; round < 400; ++round) {
    for (int k = 0; k < 30; ++k) {
      const uint64_t sample = 1 + rng() % 64;
      uint64_t item = next_item++;
      if (round % 7 < 3 && rng() % 8 == 0) item -= std::min<uint64_t>(item - 1, 1 + rng() % 2000);
      ix.add(sample, item);
      fifo.push_back({sample, item});
    }
    if (round % 3 == 2) {
      base = std::max<uint64_t>(base, next_item > 150 ? next_item - 150 : 0);
      ix.evict(base);
      size_t gone = 0;
      while (gone < fifo.size() && fifo[gone].item < base) ++gone;
      fifo.erase(fifo.begin(), fifo.begin() + long(gone));
      BOOST_TEST_REQUIRE(ix.size() == fifo.size(), "round " << round);
      for (uint64_t s = 1; s <= 64; ++s) {
        std::vector<uint64_t> expect;
        for (auto it = fifo.rbegin(); it != fifo.rend(); ++it) {
          if (it->sample != s) continue;
          if (it->item < base) break;
          expect.push_back(it->item);
        }
        BOOST_TEST_REQUIRE(items_of(ix, s, base) == expect, "sample " << s << " round " << round);
      }
    }
  }
}

// LaneChannel against a plain list: intervals from several tracks, mostly in
// end order per track with some out of order (asynchronous reads), taken
// over random spans and dropped as the window slides.
BOOST_AUTO_TEST_CASE(lane_channel_takes_what_a_plain_list_holds) {
  LaneChannel ch;
  std::vector<std::pair<uint32_t, Iv>> model;
  std::mt19937_64 rng(11);
  std::vector<int64_t> last_end(5, 0);
  int64_t dropped = INT64_MIN;
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 50; ++k) {
      const uint32_t track = uint32_t(rng() % 5) * 3;  // sparse track ids
      int64_t end = last_end[track / 3] + int64_t(rng() % 1000);
      if (rng() % 10 == 0) end -= int64_t(rng() % 3000);  // out of end order
      const int64_t a = end - int64_t(rng() % (rng() % 20 == 0 ? 20000 : 800));
      last_end[track / 3] = std::max(last_end[track / 3], end);
      ch.add(track, a, end);
      model.push_back({track, {a, end}});
    }
    for (int q = 0; q < 5; ++q) {
      const int64_t lo = std::max(dropped, int64_t(rng() % 60000)) + int64_t(rng() % 4000);
      const int64_t s = lo, e = s + int64_t(rng() % 5000) + 1;
      Ivs want;
      for (const auto& [t, v] : model)
        if (v.a < e && v.b > s && v.b > dropped) want.push_back({std::max(v.a, s), std::min(v.b, e)});
      stallscope::analyzer::normalize(want);
      Ivs got;
      ch.take(s, e, got);
      BOOST_TEST_REQUIRE(got.size() == want.size(), "round " << round << " [" << s << ", " << e << ")");
      for (size_t i = 0; i < got.size(); ++i) {
        BOOST_TEST_REQUIRE(got[i].a == want[i].a);
        BOOST_TEST_REQUIRE(got[i].b == want[i].b);
      }
    }
    if (round % 7 == 6) {  // the window slides: what ended by then is forgotten
      dropped = std::max(dropped, int64_t(round) * 250);
      ch.drop_before(dropped);
      std::erase_if(model, [&](const auto& m) { return m.second.b <= dropped; });
      BOOST_TEST(ch.size() <= model.size());
    }
  }
}

// The lineage's lanes as the window slides: items (reads and preprocessing,
// on three threads, ~10 % out of end order) evicted in arrival order while
// the oldest ended before the cut; the busy time collected afterwards is
// that of exactly the items still held (a plain FIFO model).
BOOST_AUTO_TEST_CASE(lineage_lanes_hold_exactly_the_items_left_after_eviction) {
  Lineage lin;
  struct M {
    int64_t a, b, end;
    bool read;
  };
  std::vector<M> fifo;
  std::mt19937_64 rng(5);
  std::vector<int64_t> last(3, 0);
  uint64_t sample = 1;
  int64_t cut = 0;
  for (int round = 0; round < 300; ++round) {
    for (int k = 0; k < 40; ++k) {
      const uint32_t track = uint32_t(rng() % 3);
      int64_t end = last[track] + int64_t(rng() % 500) + 1;
      if (rng() % 10 == 0) end -= int64_t(rng() % 2000);  // out of end order
      last[track] = std::max(last[track], end);
      const bool read = rng() % 2 == 0;
      Ev e = Ev::span(read ? Kind::kStorageRead : Kind::kPreprocess, track, end - int64_t(rng() % 300), end);
      const uint64_t queued = read ? rng() % 50 : 0;
      if (read) {
        e.io().sample = sample++;
        e.io().queued_ns = queued;
      } else {
        e.work().sample = sample++;
      }
      BOOST_TEST_REQUIRE((read ? lin.add_read(e) : lin.add_preprocess(e)));
      fifo.push_back({e.start - int64_t(queued), e.end, e.end, read});
    }
    if (round % 5 == 4) {
      cut = std::max(cut, last[0] - 3000);
      lin.evict_before(cut);
      size_t gone = 0;
      while (gone < fifo.size() && fifo[gone].end < cut) ++gone;
      fifo.erase(fifo.begin(), fifo.begin() + long(gone));
      BOOST_TEST_REQUIRE(lin.items() == fifo.size());
      // Every item left is still on its lane: the whole window, gathered.
      Ivs all_reads, all_pre, want_all_reads, want_all_pre;
      lin.collect_busy(INT64_MIN / 2, INT64_MAX / 2, all_reads, all_pre);
      for (const M& m : fifo) (m.read ? want_all_reads : want_all_pre).push_back({m.a, m.b});
      BOOST_TEST_REQUIRE(all_reads.size() == want_all_reads.size(), "round " << round);
      BOOST_TEST_REQUIRE(all_pre.size() == want_all_pre.size(), "round " << round);
    }
    const int64_t a = std::max<int64_t>(0, last[1] - int64_t(rng() % 6000)), b = a + int64_t(rng() % 3000) + 1;
    Ivs reads, pre, want_reads, want_pre;
    lin.collect_busy(a, b, reads, pre);
    for (const M& m : fifo)
      if (m.a < b && m.b > a) (m.read ? want_reads : want_pre).push_back({std::max(m.a, a), std::min(m.b, b)});
    for (Ivs* v : {&reads, &pre, &want_reads, &want_pre}) stallscope::analyzer::normalize(*v);
    BOOST_TEST_REQUIRE(reads.size() == want_reads.size(), "round " << round);
    BOOST_TEST_REQUIRE(pre.size() == want_pre.size(), "round " << round);
    for (size_t i = 0; i < reads.size(); ++i) BOOST_TEST_REQUIRE((reads[i].a == want_reads[i].a && reads[i].b == want_reads[i].b));
    for (size_t i = 0; i < pre.size(); ++i) BOOST_TEST_REQUIRE((pre[i].a == want_pre[i].a && pre[i].b == want_pre[i].b));
  }
}
