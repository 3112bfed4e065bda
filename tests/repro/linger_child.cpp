// A program that does not link stallscope, for test_repro_cli_run: its
// forked child keeps its trace open after the program itself exits, as
// Python's resource tracker does under `spawn` multiprocessing.
//
//   linger_child MS   a few steps; forks a child that records a range,
//                     waits until this process is gone, then MS ms more,
//                     records another range and exits 0. This process exits
//                     0 once the child's progress file is on disk (so
//                     `stallscope run` can know of it).
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

using StepFn = void (*)(uint64_t);
using PushFn = void (*)(const char*);
using PopFn = void (*)();

void range(const char* name) {
  auto push = reinterpret_cast<PushFn>(dlsym(RTLD_DEFAULT, "stallscope_range_push"));
  auto pop = reinterpret_cast<PopFn>(dlsym(RTLD_DEFAULT, "stallscope_range_pop"));
  if (push) push(name);
  usleep(2000);
  if (pop) pop();
}

// True once RUN/progress/ holds a file of process `pid` ("…-<pid>").
bool progress_of(pid_t pid) {
  const char* run = std::getenv("STALLSCOPE_OUT");
  if (run == nullptr) return true;  // not traced: nothing to wait for
  const std::string tail = "-" + std::to_string(pid);
  DIR* d = opendir((std::string(run) + "/progress").c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    found = found || (name.size() > tail.size() &&
                      name.compare(name.size() - tail.size(), tail.size(), tail) == 0);
  }
  closedir(d);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int linger_ms = std::atoi(argv[1]);
  auto begin = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_begin"));
  auto end = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "stallscope_step_end"));
  for (uint64_t i = 0; i < 3; ++i) {
    if (begin) begin(i);
    usleep(5000);
    if (end) end(i);
  }
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    range("child start");
    for (int i = 0; i < 3000 && getppid() == parent; ++i) usleep(10000);
    usleep(static_cast<useconds_t>(linger_ms) * 1000);
    range("child end");
    return 0;
  }
  for (int i = 0; i < 1000 && !progress_of(child); ++i) usleep(10000);
  return 0;
}
