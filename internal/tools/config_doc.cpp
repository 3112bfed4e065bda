// Prints docs/configuration.md's reference table, generated from the
// configuration table (scripts/config_doc.sh puts it into the page).
#include <cstdio>

#include "stallscope/internal/config.hpp"

int main() {
  const std::string table = stallscope::config::markdown_table();
  return std::fwrite(table.data(), 1, table.size(), stdout) == table.size() ? 0 : 1;
}
