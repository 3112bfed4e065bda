// Test helper: runs the sample trainer under mpirun on this machine, each
// rank reading the dataset through its own slowfs mount, and analyzes the
// run directory. Skips (77) where mpirun, slowfs or /dev/fuse is missing.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "keep_traces.hpp"
#include "scenarios/mount.hpp"
#include "stallscope/analyzer/analyzer.hpp"

namespace stallscope::testing {

inline bool have(const std::string& what) {
  return std::system(("command -v " + what + " >/dev/null 2>&1").c_str()) == 0;
}

class MpiRun {
 public:
  // Exits 77 (a visible skip) when this machine cannot run it.
  static void require() {
    if (!have("mpirun")) {
      std::cerr << "skip: mpirun not found\n";
      std::exit(77);
    }
    if (access("/dev/fuse", R_OK | W_OK) != 0) {
      std::cerr << "skip: /dev/fuse is not available\n";
      std::exit(77);
    }
  }

  explicit MpiRun(const std::string& name) {
    dir_ = std::filesystem::temp_directory_path() /
           ("stallscope-mr-" + name + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~MpiRun() {
    mounts_.clear();  // unmount before removing
    stallscope_tests::keep_traces(dir_, "multirank");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir() const { return dir_.string(); }

  // A dataset of `samples` samples of `kb` KB (once per run object).
  std::string dataset(int samples, int kb) {
    const std::string out = dir() + "/data";
    const std::string cmd = std::string(STALLSCOPE_GEN_DATASET) + " --out '" + out +
                            "' --samples " + std::to_string(samples) + " --size-kb " +
                            std::to_string(kb) + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("gen_dataset failed: " + cmd);
    return out;
  }

  // Mounts `data` for one rank with slowfs `latency_us`; returns the mount.
  std::string mount(const std::string& data, int rank, int latency_us) {
    const std::string parent =
        dir() + "/m" + std::to_string(rank) + "-" + std::to_string(mounts_.size());
    std::filesystem::create_directories(parent);
    auto m = std::make_unique<scenarios::SlowMount>(
        STALLSCOPE_SLOWFS, data, parent,
        std::vector<std::string>{"--latency-us", std::to_string(latency_us)});
    if (!m->ok()) {
      std::cerr << "skip: " << m->why() << "\n";
      std::exit(77);
    }
    const std::string p = m->path();
    mounts_.push_back(std::move(m));
    return p;
  }

  // Runs the trainer on `ranks` ranks, rank r reading mounts[r]; returns the run dir.
  std::string train(int ranks, const std::vector<std::string>& mounts, const std::string& flags,
                    const std::string& tag) {
    const std::string run = dir() + "/run-" + tag;
    std::string cmd = "STALLSCOPE_OUT='" + run +
                      "' mpirun --allow-run-as-root --oversubscribe --bind-to none "
                      "--mca mpi_yield_when_idle 1 -np " +
                      std::to_string(ranks) + " " + STALLSCOPE_TRAINER + " --quiet --data '" +
                      mounts[0] + "'";
    for (int r = 0; r < ranks; ++r)
      cmd += " --rank-data " + std::to_string(r) + "='" + mounts[size_t(r)] + "'";
    cmd += " " + flags + " > '" + dir() + "/trainer-" + tag + ".log' 2>&1";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("trainer failed (log " + dir() + "/trainer-" + tag +
                               ".log): " + cmd);
    return run;
  }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<scenarios::SlowMount>> mounts_;
};

}  // namespace stallscope::testing
