// `stallscope run --set KEY=VALUE`: settings tried without editing the
// program, checked here once and passed on in STALLSCOPE_SET, where the
// Python hooks (`dataloader.*`) and stallscope's loader (`loader.*`) read
// them again (docs/cli.md, "Trying a setting").
//
// KEY is NAMESPACE[SELECTOR].FIELD or NAMESPACE.FIELD. A bad one is named
// on stderr and left out; the program runs all the same.
#include <unistd.h>

#include <cctype>
#include <iostream>
#include <string_view>

#include "cmd_run.hpp"
#include "stallscope/file_summary.hpp"  // terminal_safe
#include "stallscope/loader/settings.hpp"

namespace stallscope::cli::run {
namespace {

enum class Type { kCount, kPrefetch, kBool, kSharing };

struct DataLoaderField {
  const char* name;
  Type type;
  const char* accepts;
};

const DataLoaderField kDataLoader[] = {
    {"num_workers", Type::kCount, "an integer in [0, 1024]"},
    {"prefetch_factor", Type::kPrefetch, "an integer in [1, 1024] or none"},
    {"persistent_workers", Type::kBool, "a boolean (true/false, 1/0, yes/no, on/off)"},
    {"pin_memory", Type::kBool, "a boolean (true/false, 1/0, yes/no, on/off)"},
    // torch.multiprocessing's strategy: process-wide, applied by the hooks
    // when the selected DataLoader is constructed and in its workers.
    {"sharing_strategy", Type::kSharing, "file_descriptor or file_system"},
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool all_digits(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// An integer in [lo, hi], in decimal without leading zeros; "" when not one.
std::string integer(const std::string& v, long lo, long hi) {
  if (!all_digits(v, 9)) return "";
  const long n = std::stol(v);
  return n >= lo && n <= hi ? std::to_string(n) : "";
}

std::string boolean(const std::string& v) {
  const std::string l = lower(v);
  if (l == "true" || l == "1" || l == "yes" || l == "on") return "true";
  if (l == "false" || l == "0" || l == "no" || l == "off") return "false";
  return "";
}

std::string dataloader_fields() {
  std::string s;
  for (const auto& f : kDataLoader) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

std::string loader_fields() {
  std::string s;
  for (const auto& f : loader::setting_fields()) s += (s.empty() ? "" : ", ") + f;
  return s;
}

// A `dataloader.*` value normalized, or "" with *why.
std::string dataloader_value(const std::string& field, const std::string& v, std::string* why) {
  for (const auto& f : kDataLoader) {
    if (field != f.name) continue;
    std::string out;
    if (f.type == Type::kCount) out = integer(v, 0, 1024);
    if (f.type == Type::kPrefetch) out = lower(v) == "none" ? "none" : integer(v, 1, 1024);
    if (f.type == Type::kBool) out = boolean(v);
    if (f.type == Type::kSharing && (lower(v) == "file_descriptor" || lower(v) == "file_system"))
      out = lower(v);
    if (out.empty())
      *why = "bad value '" + v + "' for dataloader." + field + " (not " + f.accepts + ")";
    return out;
  }
  *why = "unknown field '" + field + "' (known: " + dataloader_fields() + ")";
  return "";
}

bool identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A DataLoader selector's normalized text and which loaders it picks, or
// false when it is none of [N], [file:line], [Name].
bool selector(const std::string& sel, std::string* norm, std::string* picks) {
  if (all_digits(sel, 9)) {
    *norm = std::to_string(std::stol(sel));
    *picks = "DataLoader number " + *norm + " in construction order (0-based)";
    return true;
  }
  const size_t colon = sel.rfind(':');
  if (colon != std::string::npos && colon > 0 && all_digits(sel.substr(colon + 1), 9) &&
      std::stol(sel.substr(colon + 1)) > 0) {
    *norm = sel.substr(0, colon) + ":" + std::to_string(std::stol(sel.substr(colon + 1)));
    *picks = "the DataLoader constructed at " + *norm;
    return true;
  }
  if (identifier(sel)) {
    *norm = sel;
    *picks = "DataLoaders over a " + sel + " dataset";
    return true;
  }
  return false;
}

// Splits NAMESPACE[SELECTOR].FIELD; "" or what is wrong with the key.
std::string split_key(const std::string& key, std::string* ns, std::string* sel, bool* has_sel,
                      std::string* field) {
  const size_t end = key.find_first_of("[.");
  *ns = key.substr(0, end);
  if (*ns != "dataloader" && *ns != "loader")
    return "unknown namespace '" + *ns + "' (known: dataloader, loader)";
  size_t dot = end;
  *has_sel = end != std::string::npos && key[end] == '[';
  if (*has_sel) {
    const size_t close = key.find(']', end);
    if (close == std::string::npos) return "selector '" + key.substr(end) + "' has no closing ']'";
    *sel = key.substr(end + 1, close - end - 1);
    dot = close + 1;
  }
  if (dot >= key.size() || key[dot] != '.')
    return "expected '.FIELD' after '" + key.substr(0, dot) + "'";
  *field = key.substr(dot + 1);
  return "";
}

}  // namespace

std::string check_setting_arg(const std::string& arg, TriedSetting* out) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) return "no '=' (expected KEY=VALUE)";
  if (arg.find(';') != std::string::npos)
    return "';' separates settings in STALLSCOPE_SET and cannot be part of one";
  const std::string key = trim(arg.substr(0, eq)), value = trim(arg.substr(eq + 1));
  std::string ns, sel, field;
  bool has_sel = false;
  if (std::string why = split_key(key, &ns, &sel, &has_sel, &field); !why.empty()) return why;
  std::string norm_sel;
  std::string picks =
      ns == "loader" ? "stallscope's loader (the sample trainer)" : "every DataLoader";
  if (has_sel && ns == "loader") return "the loader namespace takes no selector";
  if (has_sel && !selector(sel, &norm_sel, &picks))
    return "bad selector '[" + sel + "]' (expected [N], [file:line] or [DatasetClass])";
  std::string why, norm;
  if (ns == "loader") {
    if (loader::check_setting(field, value, &norm, &why) != 0) return why;
  } else if ((norm = dataloader_value(field, value, &why)).empty()) {
    return why;
  }
  out->item = ns + (has_sel ? "[" + norm_sel + "]" : "") + "." + field + "=" + norm;
  out->picks = picks;
  return "";
}

std::vector<TriedSetting> check_setting_args(const std::vector<std::string>& args) {
  std::vector<TriedSetting> ok;
  for (const auto& a : args) {
    TriedSetting t;
    const std::string why = check_setting_arg(a, &t);
    if (why.empty()) {
      ok.push_back(t);
      continue;
    }
    std::cerr << reader::terminal_safe("stallscope: --set '" + a + "': " + why + "; not applied")
              << "\n";
  }
  return ok;
}

std::string settings_env_problem(const std::vector<std::string>& items) {
  if (items.empty()) return "";
  size_t bytes = std::string_view("STALLSCOPE_SET=").size() + 1;  // and the NUL
  for (const auto& i : items) bytes += i.size() + 1;              // and a ';' or the NUL
  bytes -= 1;
  // execve refuses any one argument or environment string past
  // MAX_ARG_STRLEN (32 pages) with E2BIG, whatever the total limit.
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t limit = 32 * static_cast<size_t>(page > 0 ? page : 4096);
  if (bytes <= limit) return "";
  return "STALLSCOPE_SET would be " + std::to_string(bytes) + " bytes (the " +
         std::to_string(items.size()) + " --set item(s) joined with ';'), more than the " +
         std::to_string(limit) +
         " bytes the kernel allows one environment string (MAX_ARG_STRLEN, 32 pages): the "
         "program could not be started; give fewer or shorter --set values";
}

std::string known_setting_keys() {
  return "dataloader[SELECTOR].{" + dataloader_fields() + "}, loader.{" + loader_fields() + "}";
}

}  // namespace stallscope::cli::run
