// docs/configuration.md's reference table, rendered from the configuration
// table (scripts/config_doc.sh writes it into the page; test_config_table
// checks that the page holds exactly this).
#include <string>

#include "stallscope/internal/config.hpp"

namespace stallscope::config {

namespace {

std::string words_of(const char* words) {
  std::string out;
  for (const char* w = words; *w != '\0'; ++w) {
    if (*w == '|') {
      out += "`, `";
    } else {
      out += *w;
    }
  }
  return "`" + out + "`";
}

std::string type_of(const Var& v) {
  const std::string unit = *v.unit != '\0' ? std::string(" ") + v.unit : "";
  switch (v.type) {
    case Type::kSwitch:
      return "`on`, `off`";
    case Type::kInteger:
      return "integer " + std::to_string(v.lo) + " … " + std::to_string(v.hi) + unit;
    case Type::kWord:
      return words_of(v.words);
    case Type::kText:
      return *v.unit != '\0' ? std::string("number,") + unit : "text";
    case Type::kKnob:
      return "loader knob ([loader.md](loader.md))";
  }
  return "";
}

}  // namespace

std::string markdown_table() {
  std::string out =
      "| variable | value | default | read by | meaning |\n"
      "|---|---|---|---|---|\n";
  for (const Var& v : table()) {
    out += "| `";
    out += v.name;
    out += "` | " + type_of(v) + " | ";
    if (*v.dflt != '\0') {
      out += '`';
      out += v.dflt;
      out += '`';
    } else {
      out += "—";
    }
    out += " | ";
    out += v.readers;
    out += " | ";
    out += v.doc;
    out += " |\n";
  }
  return out;
}

}  // namespace stallscope::config
