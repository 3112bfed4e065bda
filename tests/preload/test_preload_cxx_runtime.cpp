// Preloading never chooses the program's C++ runtime: the shim and the
// recorder it brings need no libstdc++ (linked in, hidden; libgcc_s stays
// shared: one unwinder for the process, which thread cancellation needs),
// the shim exports only the entry points of its version script
// (integrations/preload/src/exports.map), and a program whose C++ module
// ships its own libstdc++ (a conda environment's Python and its extensions)
// runs under the shim with that copy: a shim that needed libstdc++.so.6
// would have loaded the system's at start-up, and the module's dlopen would
// have been given that one.
#include <boost/test/unit_test.hpp>

#include <set>
#include <sstream>

#include "preload/preload_run.hpp"

using namespace stallscope::test;

namespace {

std::string recorder() { return build_dir() + "/libtrace/libstallscope_trace.so.1"; }

// The output of `sh -c command`.
std::string output_of(const std::string& command) {
  const RunResult r = run({"/bin/sh", "-c", command}, {}, false, 60);
  BOOST_TEST_REQUIRE(r.exit_code == 0, command << ": " << r.err);
  return r.out;
}

std::vector<std::string> needed(const std::string& lib) {
  std::vector<std::string> out;
  std::istringstream in(output_of("readelf -d '" + lib + "'"));
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("(NEEDED)");
    const size_t open = line.find('[', at), close = line.find(']', open);
    if (at != std::string::npos && close != std::string::npos)
      out.push_back(line.substr(open + 1, close - open - 1));
  }
  return out;
}

// Symbols a file defines, as `readelf -sW` lists them (the dynamic table
// with --dyn-syms), filtered: GLOBAL or WEAK, defined, DEFAULT visibility.
std::set<std::string> defined_default(const std::string& file, bool dynamic) {
  std::set<std::string> out;
  std::istringstream in(output_of(std::string("readelf -W ") + (dynamic ? "--dyn-syms" : "-s") +
                                  " '" + file + "'"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(f >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if ((bind != "GLOBAL" && bind != "WEAK") || vis != "DEFAULT" || ndx == "UND") continue;
    out.insert(name.substr(0, name.find('@')));
  }
  return out;
}

// The names the version script makes global.
std::set<std::string> version_script_names() {
  std::ifstream in(std::string(STALLSCOPE_SOURCE_DIR) + "/integrations/preload/src/exports.map");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t a; (a = text.find("/*")) != std::string::npos;)
    text.erase(a, text.find("*/", a) + 2 - a);
  text = text.substr(text.find("global:") + 7);
  text = text.substr(0, text.find("local:"));
  std::set<std::string> out;
  std::istringstream words(text);
  for (std::string w; std::getline(words, w, ';');) {
    const size_t b = w.find_first_not_of(" \n\t"), e = w.find_last_not_of(" \n\t");
    if (b != std::string::npos) out.insert(w.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_cxx_runtime)

BOOST_AUTO_TEST_CASE(shim_and_recorder_need_no_cxx_runtime) {
  for (const std::string& lib : {shim(), recorder()}) {
    const std::vector<std::string> libs = needed(lib);
    BOOST_TEST_REQUIRE(!libs.empty(), lib << ": readelf -d shows no NEEDED");
    for (const std::string& n : libs) {
      BOOST_TEST(n.rfind("libstdc++", 0) != 0, lib << " needs " << n);
    }
  }
}

BOOST_AUTO_TEST_CASE(shim_exports_only_its_version_script) {
  const std::set<std::string> script = version_script_names();
  BOOST_TEST_REQUIRE(script.count("read") == 1u, "exports.map parsed to " << script.size());
  const std::set<std::string> exported = defined_default(shim(), true);
  for (const std::string& name : exported) {
    BOOST_TEST(script.count(name) == 1u, "the shim exports " << name << ", not in exports.map");
    BOOST_TEST(name.rfind("_Z", 0) != 0, "the shim exports the C++ symbol " << name);
  }
  // Every name of the script is defined (a stale line is a wrapper gone),
  // but for the entries of optional parts: NVTX's (headers found at build time).
  for (const std::string& name : script)
    if (name != "InitializeInjectionNvtx2")
      BOOST_TEST(exported.count(name) == 1u, "exports.map names " << name << ", which the shim lacks");
}

// A wrapper the sources mark for export (STALLSCOPE_SHIM_EXPORT) but the
// version script leaves out would be hidden: the program would never call it.
BOOST_AUTO_TEST_CASE(every_wrapper_the_sources_export_is_in_the_script) {
  const std::set<std::string> script = version_script_names();
  size_t objects = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(STALLSCOPE_SHIM_OBJECT_DIR)) {
    if (e.path().extension() != ".o") continue;
    ++objects;
    for (const std::string& name : defined_default(e.path().string(), false))
      if (name.rfind("_Z", 0) != 0)
        BOOST_TEST(script.count(name) == 1u,
                   e.path().filename().string() << " exports " << name << ", not in exports.map");
  }
  BOOST_TEST(objects > 10u, "object files under " << STALLSCOPE_SHIM_OBJECT_DIR);
}

BOOST_AUTO_TEST_CASE(module_with_its_own_libstdcxx_keeps_it_when_preloaded) {
  const std::string own = helper("own-runtime/libstdc++.so.6");
  TempDir dir;
  // Premise: on its own, the program runs with the module's copy.
  const RunResult plain = run({helper("own_cxx_runtime")}, {}, false, 30);
  BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.err);
  BOOST_TEST_REQUIRE(plain.out.find("libstdc++ " + own + "\n") != std::string::npos, plain.out);
  const RunResult r = run({helper("own_cxx_runtime")}, {{"STALLSCOPE_OUT", dir.path()}}, true, 30);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("libstdc++ " + own + "\n") != std::string::npos, r.out);
  size_t copies = 0;
  for (size_t at = 0; (at = r.out.find("\nlibstdc++ ", at)) != std::string::npos; ++at) ++copies;
  BOOST_TEST(copies == 1u, "libstdc++ copies mapped under the shim:\n" << r.out);
}

BOOST_AUTO_TEST_SUITE_END()
