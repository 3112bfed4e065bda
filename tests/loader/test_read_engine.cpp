// White-box: the read engine against fake readers (RELIABILITY.md 21, 22).
// A completion that matches no request in flight (stray, duplicated, from
// an older generation of its slot) is counted and never applied; O_DIRECT
// refused at a read while other reads of the file are queued leaves their
// descriptor valid. The slots a poll's completions free are submitted
// before the samples those completions ended are reported.
#include <deque>

#include <boost/test/unit_test.hpp>

#include "file_table.hpp"
#include "loader_fixtures.hpp"
#include "read_engine.hpp"
#include "stallscope/loader/device.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

// Twelve 20000-byte sample files of known content.
struct Files {
  FileSet files{std::vector<size_t>(12, 20000)};
  sl::Dataset ds;
  Files() {
    std::string err;
    BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  }
};

// One buffer per file of Files, each sample queued on `engine`.
struct Buffers {
  std::vector<std::vector<std::byte>> bytes;
  Buffers(std::vector<sl::detail::SampleRead>& reads, sl::detail::ReadEngine& engine)
      : bytes(reads.size(), std::vector<std::byte>(24576)) {
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].file = static_cast<uint32_t>(i);
      reads[i].length = 20000;
      reads[i].buf = bytes[i].data();
      reads[i].buf_bytes = bytes[i].size();
      engine.add(&reads[i]);
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(read_engine)

BOOST_AUTO_TEST_CASE(stray_and_duplicate_completions_are_never_applied) {
  // A reader that answers every request twice and adds one for no request.
  struct EchoReader : sl::StorageReader {
    std::vector<sl::Completion> q;
    int submit(std::span<const sl::ReadRequest> rs) noexcept override {
      for (const auto& r : rs) {
        const ssize_t n = ::pread(r.fd, r.buf, r.length, static_cast<off_t>(r.offset));
        q.push_back({r.user_data, static_cast<int32_t>(n)});
        q.push_back({r.user_data, static_cast<int32_t>(n)});  // duplicate
        q.push_back({r.user_data ^ (1ull << 40), 4096});      // stale generation
      }
      return static_cast<int>(rs.size());
    }
    int reap(std::span<sl::Completion> out, unsigned, int) noexcept override {
      size_t n = std::min(out.size(), q.size());
      std::copy(q.begin(), q.begin() + static_cast<long>(n), out.begin());
      q.erase(q.begin(), q.begin() + static_cast<long>(n));
      return static_cast<int>(n);
    }
    int register_buffers(std::span<const sl::BufferRange>) noexcept override { return 0; }
    uint32_t capacity() const noexcept override { return 4; }
    uint32_t in_flight() const noexcept override { return static_cast<uint32_t>(q.size()); }
    std::string_view name() const noexcept override { return "echo"; }
  } reader;
  Files s;
  sl::detail::FileTable files(s.ds, sl::real_sys(), sl::Toggle::kOff);
  int done = 0;
  sl::detail::ReadEngine engine(reader, files, 8192, [&](sl::detail::SampleRead*) { ++done; });
  std::vector<sl::detail::SampleRead> reads(12);
  Buffers bufs(reads, engine);
  for (int i = 0; i < 1000 && !engine.idle(); ++i) BOOST_REQUIRE(engine.poll(10) == 0);
  BOOST_TEST(done == 12);
  BOOST_TEST(engine.stats().reads == 12u * 3);  // 3 chunks of 8192 per sample
  BOOST_TEST(engine.stats().stray == 2u * 36);
  for (size_t i = 0; i < 12; ++i) BOOST_TEST(fnv1a(reads[i].view, 20000) == s.files.hashes[i]);
}

BOOST_AUTO_TEST_CASE(direct_refused_at_a_read_keeps_the_queued_reads_valid) {
  // Holds every request; answers the first with EINVAL (O_DIRECT refused),
  // then runs the others with pread on the descriptors they were given.
  struct DeferredReader : sl::StorageReader {
    std::deque<sl::ReadRequest> queued;
    bool refused = false;
    int submit(std::span<const sl::ReadRequest> rs) noexcept override {
      queued.insert(queued.end(), rs.begin(), rs.end());
      return static_cast<int>(rs.size());
    }
    int reap(std::span<sl::Completion> out, unsigned, int) noexcept override {
      size_t n = 0;
      for (; n < out.size() && !queued.empty(); ++n) {
        const sl::ReadRequest r = queued.front();
        queued.pop_front();
        if (!refused) {
          refused = true;
          out[n++] = {r.user_data, -EINVAL};
          break;
        }
        const ssize_t k = ::pread(r.fd, r.buf, r.length, static_cast<off_t>(r.offset));
        out[n] = {r.user_data, k < 0 ? -errno : static_cast<int32_t>(k)};
      }
      return static_cast<int>(n);
    }
    int register_buffers(std::span<const sl::BufferRange>) noexcept override { return 0; }
    uint32_t capacity() const noexcept override { return 8; }
    uint32_t in_flight() const noexcept override { return static_cast<uint32_t>(queued.size()); }
    std::string_view name() const noexcept override { return "deferred"; }
  } reader;
  FileSet set({40000});
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(set.root(), &ds, &err) == 0);
  sl::detail::FileTable files(ds, sl::real_sys(), sl::Toggle::kOn);
  int done = 0;
  sl::detail::ReadEngine engine(reader, files, 16384, [&](sl::detail::SampleRead*) { ++done; });
  bool locked = false;
  const uint64_t bytes = sl::detail::direct_span(0, 40000);
  auto* buf = static_cast<std::byte*>(sl::alloc_locked(bytes, false, &locked));  // aligned
  sl::detail::SampleRead read;
  read.length = 40000;
  read.buf = buf;
  read.buf_bytes = bytes;
  engine.add(&read);
  for (int i = 0; i < 100 && !engine.idle(); ++i) BOOST_REQUIRE(engine.poll(10) == 0);
  BOOST_TEST(done == 1);
  BOOST_TEST(read.err == 0, read.error);  // not EBADF: the refused fd stayed open
  BOOST_TEST(files.direct_fallbacks() == 1u);
  BOOST_TEST(fnv1a(read.view, 40000) == set.hashes[0]);
  sl::free_locked(buf, bytes, locked);
}

BOOST_AUTO_TEST_CASE(freed_slots_are_resubmitted_before_samples_are_reported) {
  // One request in flight at a time (queue depth 1), each answered by pread
  // at the next reap: at every `done`, the next sample's read must already
  // be in flight, so the device never waits on the callback.
  struct SerialReader : sl::StorageReader {
    std::deque<sl::ReadRequest> queued;
    uint64_t submitted = 0;
    int submit(std::span<const sl::ReadRequest> rs) noexcept override {
      const size_t n = std::min<size_t>(rs.size(), 1 - queued.size());
      queued.insert(queued.end(), rs.begin(), rs.begin() + static_cast<long>(n));
      submitted += n;
      return static_cast<int>(n);
    }
    int reap(std::span<sl::Completion> out, unsigned, int) noexcept override {
      if (queued.empty() || out.empty()) return 0;
      const sl::ReadRequest r = queued.front();
      queued.pop_front();
      const ssize_t k = ::pread(r.fd, r.buf, r.length, static_cast<off_t>(r.offset));
      out[0] = {r.user_data, k < 0 ? -errno : static_cast<int32_t>(k)};
      return 1;
    }
    int register_buffers(std::span<const sl::BufferRange>) noexcept override { return 0; }
    uint32_t capacity() const noexcept override { return 1; }
    uint32_t in_flight() const noexcept override { return static_cast<uint32_t>(queued.size()); }
    std::string_view name() const noexcept override { return "serial"; }
  } reader;
  Files s;
  sl::detail::FileTable files(s.ds, sl::real_sys(), sl::Toggle::kOff);
  std::vector<uint64_t> submitted_at_done;  // requests submitted when sample i was reported
  std::vector<size_t> order;
  std::vector<sl::detail::SampleRead> reads(12);
  sl::detail::ReadEngine engine(reader, files, 32768, [&](sl::detail::SampleRead* r) {
    order.push_back(static_cast<size_t>(r - reads.data()));
    submitted_at_done.push_back(reader.submitted);
  });
  Buffers bufs(reads, engine);
  for (int i = 0; i < 100 && !engine.idle(); ++i) BOOST_REQUIRE(engine.poll(10) == 0);
  BOOST_REQUIRE(submitted_at_done.size() == 12u);
  for (size_t i = 0; i < 12; ++i) {
    BOOST_TEST(order[i] == i);  // one chunk per sample, read in order
    // Sample i is its request i+1; request i+2 (the next sample's) is in
    // flight by the time it is reported, except after the last.
    BOOST_TEST(submitted_at_done[i] == std::min<uint64_t>(i + 2, 12), "sample " << i);
    BOOST_TEST(fnv1a(reads[i].view, 20000) == s.files.hashes[i]);
  }
}

BOOST_AUTO_TEST_SUITE_END()
