// The topology attachment, written once per host and run: the first
// process to claim `<run dir>/.topology-<host>` records it.
#include "stallscope/topo/capture.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <stallscope/trace.hpp>

#include "stallscope/topo/topology.hpp"

namespace stallscope::topo {
namespace {

bool claim(std::string_view run_dir) {
  std::string dir(run_dir);
  if (dir.empty())
    if (const char* env = std::getenv("STALLSCOPE_OUT")) dir = env;
  if (dir.empty()) return true;  // no shared place to agree in: record it
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string path = dir + "/.topology-" + host;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno != EEXIST;  // unwritable dir: record rather than lose it
  ::close(fd);
  return true;
}

}  // namespace

int capture_topology(std::string_view run_dir) noexcept {
  try {
    if (!claim(run_dir)) return 1;
    std::string error, xml;
    auto t = discover(&error, &xml);
    if (!t) return -ENODEV;
    int rc = attach("topology", to_json(*t));
    if (rc == 0 && !xml.empty()) rc = attach("topology.hwloc.xml", xml);
    return rc;
  } catch (...) {
    return -ENOMEM;
  }
}

}  // namespace stallscope::topo
