// stallscope loader — settings tried without editing the program.
//
// `stallscope run --set loader.workers=4 -- trainer …` passes its settings
// in STALLSCOPE_SET ("KEY=VALUE;KEY=VALUE", docs/cli.md). The `loader.*`
// items are this loader's knobs, applied over what the program chose; the
// other namespaces (`dataloader.*`, PyTorch's) are not ours and are skipped.
// The variable may be set by hand, so every item is checked again here.
//
//   Config cfg;                      // defaults, then flags and variables
//   std::vector<SettingOutcome> tried;
//   apply_settings(cfg, std::getenv("STALLSCOPE_SET"), &tried);
//   report_settings(tried);          // marks in the trace, lines on stderr
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stallscope/loader/config.hpp"
#include "stallscope/loader/export.hpp"

namespace stallscope::loader {

// What became of one `loader.*` item.
struct SettingOutcome {
  bool applied = false;
  std::string key;     // "loader.workers", as given
  std::string value;   // normalized when applied, as given when refused
  std::string was;     // the knob's value before (applied only)
  std::string reason;  // why it was refused
  // The mark of docs/cli.md: "set applied loader.workers=4 at - (was 2)",
  // "set refused loader.workers=0 at -: not an integer in [1, 256]".
  STALLSCOPE_LOADER_API std::string mark() const;
};

// The fields of the `loader` namespace, in documentation order.
STALLSCOPE_LOADER_API const std::vector<std::string>& setting_fields() noexcept;
// Checks `loader.<field>=<value>`. Returns 0 with *normalized (booleans
// true/false, sizes and counts in decimal), -ENOENT for an unknown field,
// -EINVAL for a bad value; *error then says what is accepted.
STALLSCOPE_LOADER_API int check_setting(std::string_view field, std::string_view value,
                                        std::string* normalized, std::string* error) noexcept;
// Applies every `loader.*` item of `set` (a STALLSCOPE_SET value; null or
// empty: none) to cfg in order, one outcome per item. Returns the number of
// items applied, or -ENOMEM.
STALLSCOPE_LOADER_API int apply_settings(Config& cfg, const char* set,
                                         std::vector<SettingOutcome>* out) noexcept;
// Writes each outcome's mark into the trace (stallscope_mark) and on stderr
// as "stallscope: <mark>".
STALLSCOPE_LOADER_API void report_settings(const std::vector<SettingOutcome>& tried) noexcept;

}  // namespace stallscope::loader
