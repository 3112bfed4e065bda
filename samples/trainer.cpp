// trainer — the sample training pipeline: a complete loop over the stallscope
// loader (read → zstd decode and augment on the oneTBB pool → pinned batch →
// H2D → forward/backward → gradient all-reduce → update), with step markers
// and tracing, on the emulated device of DESIGN.md. Every knob that moves a
// bottleneck is a flag (trainer --help), so the scenario suite and
// `stallscope demo` can put the bottleneck where they want.
//
//   gen_dataset --out /tmp/ds --samples 2000 --size-kb 64
//   STALLSCOPE_OUT=/tmp/run trainer --data /tmp/ds --steps 60 --loader-workers=1
//   stallscope report /tmp/run
//   mpirun -np 2 trainer --data /tmp/ds --grad-mb 200     # two ranks
//
// A single-rank run needs no launcher and never loads MPI: the MPI backend is
// a module (libstallscope_trainer_mpi.so) opened only under a launcher.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <stallscope/loader/loader.hpp>
#include <stallscope/trace.hpp>

#include "trainer/comm.hpp"
#include "trainer/decode.hpp"
#include "trainer/device.hpp"
#include "trainer/emulated_device.hpp"
#include "trainer/facts.hpp"
#include "trainer/options.hpp"
#include "trainer/step_loop.hpp"

namespace sl = stallscope::loader;

namespace {

int load_dataset(const std::string& dir, sl::Dataset* ds, std::string* err) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(dir) / "index")) return sl::Dataset::from_shards(dir + "/index", ds, err);
  if (fs::exists(fs::path(dir) / "list")) return sl::Dataset::from_file_list(dir + "/list", ds, err);
  return sl::Dataset::from_directory(dir, ds, err);
}

void print_result(const trainer::Options& o, int rank, const trainer::StepTimes& t) {
  const trainer::RunSummary s = trainer::summarize(t);
  if (!o.quiet)
    std::printf("trainer rank %d: %zu steps, step p50 %.2f ms, mean %.2f ms (steady), %.0f samples/s\n",
                rank, t.step_ms.size(), s.p50_ms, s.mean_ms, s.samples_per_s);
  if (!o.summary_json.empty() && rank == 0) trainer::write_summary(o.summary_json, o, t, s);
}

}  // namespace

int main(int argc, char** argv) {
  trainer::Options o;
  std::string err;
  if (const int rc = trainer::parse_options(argc, argv, &o, &err); rc != 0) {
    if (rc == 1) return std::fputs(trainer::usage().c_str(), stdout), 0;
    std::fprintf(stderr, "trainer: %s\n", err.c_str());
    return 2;
  }
  if (!o.trace) setenv("STALLSCOPE_ENABLE", "off", 1);
  stallscope::loader::report_settings(o.settings);
  std::string note;
  auto comm = trainer::make_comm(&note);
  const int rank = comm->rank();
  if (!o.quiet && rank == 0) std::fprintf(stderr, "trainer: %s\n", note.c_str());
  o.loader.rank = static_cast<uint32_t>(rank);
  std::unique_ptr<trainer::Device> dev;
  if (trainer::make_device(o, 2, comm.get(), &dev, &note) != 0)
    return std::fprintf(stderr, "trainer: %s\n", note.c_str()), 2;
  if (!o.quiet && rank == 0) std::fprintf(stderr, "trainer: %s\n", note.c_str());
  // The loader's H2D goes to the device the trainer computes on.
  if (o.loader.device == sl::DeviceKind::kAuto)
    o.loader.device = dev->kind() == "cuda" ? sl::DeviceKind::kCuda : sl::DeviceKind::kEmulated;
  // --copy-in-step: the trainer copies on its compute stream, the loader not at all.
  if (o.copy_in_step) o.loader.device = sl::DeviceKind::kNone;
  o.loader.world_size = static_cast<uint32_t>(comm->size());
  sl::Dataset ds;
  const std::string data = trainer::data_for_rank(o, rank);
  if (load_dataset(data, &ds, &err) != 0) return std::fprintf(stderr, "trainer: %s\n", err.c_str()), 1;
  const uint64_t sample_bytes = o.sample_bytes ? o.sample_bytes : trainer::mean_decoded_bytes(data);
  trainer::record_facts(o, ds, *comm, o.trace && !o.quiet && rank == 0);
  sl::Pipeline p{.transform = trainer::make_transform({o.decode_us}),
                 .collate = trainer::make_collate(sample_bytes),
                 .staging_bytes = sample_bytes * o.loader.batch_size};
  const bool probe = o.loader.probe;
  o.loader.probe = false;  // record_facts ran it, in the format the analyzer reads
  std::unique_ptr<sl::Loader> loader;
  if (sl::Loader::create(std::move(ds), o.loader, std::move(p), &loader, &err) != 0)
    return std::fprintf(stderr, "trainer: %s\n", err.c_str()), 1;
  o.loader.probe = probe;
  if (const trainer::EmulatedDevice* e = dev->emulated())
    trainer::attach_device_model(o, *e, loader->device());
  stallscope::attach("trainer.device", dev->model_json());
  comm->barrier();
  trainer::StepTimes times;
  const int rc = trainer::run_steps(o, rank, *loader, *dev, &times, &err);
  loader->stop();
  if (rc != 0) return std::fprintf(stderr, "trainer: %s\n", err.c_str()), 1;
  print_result(o, rank, times);
  comm->barrier();
  return 0;
}
