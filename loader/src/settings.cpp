// The `loader.*` items of STALLSCOPE_SET (see settings.hpp). Values are
// checked by the same knob table as flags and variables (set_knob), so a
// setting accepts exactly what --loader-<name> accepts.
#include "stallscope/loader/settings.hpp"

#include <errno.h>

#include <cctype>
#include <cstdio>
#include <string>

#include <stallscope/trace.h>

#include "stallscope/internal/note.hpp"

namespace stallscope::loader {

namespace {

using Getter = std::string (*)(const Config&);

std::string yes_no(bool b) { return b ? "true" : "false"; }

struct Field {
  const char* name;  // loader.<name>, the knob of the same name
  Getter get;        // the normalized value
};

const Field kFields[] = {
    {"workers", [](const Config& c) { return std::to_string(c.workers); }},
    {"prefetch", [](const Config& c) { return std::to_string(c.prefetch_batches); }},
    {"queue_depth", [](const Config& c) { return std::to_string(c.queue_depth); }},
    {"pinned", [](const Config& c) { return yes_no(c.pinned); }},
    {"huge_pages", [](const Config& c) { return yes_no(c.huge_pages); }},
    {"batch_size", [](const Config& c) { return std::to_string(c.batch_size); }},
    {"group_size", [](const Config& c) { return std::to_string(c.group_size); }},
    {"read_size", [](const Config& c) { return std::to_string(c.read_size); }},
    {"pread_threads", [](const Config& c) { return std::to_string(c.pread_threads); }},
    {"direct",
     [](const Config& c) -> std::string {
       return c.direct == Toggle::kAuto ? "auto" : yes_no(c.direct == Toggle::kOn);
     }},
    {"backend", [](const Config& c) { return std::string(backend_name(c.backend)); }},
    {"drop_last", [](const Config& c) { return yes_no(c.drop_last); }},
    {"shuffle", [](const Config& c) { return yes_no(c.shuffle); }},
};

const Field* find_field(std::string_view name) {
  for (const Field& f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Text from the environment shown on stderr and in the trace: no control bytes.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

std::string known_fields() {
  std::string s;
  for (const Field& f : kFields) s += (s.empty() ? "" : ", ") + std::string(f.name);
  return s;
}

// One item "KEY=VALUE" of STALLSCOPE_SET; false when it is not ours.
bool outcome_of(Config& cfg, std::string_view item, SettingOutcome* o) {
  const size_t eq = item.find('=');
  const std::string_view key = trim(item.substr(0, eq));
  if (key.rfind("loader.", 0) != 0 && key.rfind("loader[", 0) != 0) return false;
  o->key = printable(key);
  o->value = eq == std::string_view::npos ? "" : printable(trim(item.substr(eq + 1)));
  if (eq == std::string_view::npos) return o->reason = "no '=' (expected KEY=VALUE)", true;
  if (key[6] == '[') return o->reason = "the loader namespace takes no selector", true;
  const std::string_view field = key.substr(7);
  const Field* f = find_field(field);
  if (f == nullptr)
    return o->reason = "unknown field '" + printable(field) + "' (known: " + known_fields() + ")",
           true;
  const std::string was = f->get(cfg);
  std::string error;
  if (set_knob(cfg, field, lower(trim(item.substr(eq + 1))), &error) != 0)
    return o->reason = error, true;
  o->applied = true;
  o->was = was;
  o->value = f->get(cfg);
  return true;
}

}  // namespace

std::string SettingOutcome::mark() const {
  if (applied) return "set applied " + key + "=" + value + " at - (was " + was + ")";
  return "set refused " + key + "=" + value + " at -: " + reason;
}

const std::vector<std::string>& setting_fields() noexcept {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Field& f : kFields) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

int check_setting(std::string_view field, std::string_view value, std::string* normalized,
                  std::string* error) noexcept {
  try {
    const Field* f = find_field(field);
    if (f == nullptr) {
      if (error)
        *error = "unknown field '" + printable(field) + "' (known: " + known_fields() + ")";
      return -ENOENT;
    }
    Config scratch;
    std::string why;
    if (set_knob(scratch, field, lower(trim(value)), &why) != 0) {
      if (error)
        *error = "bad value '" + printable(value) + "' for loader." + f->name + " (" + why + ")";
      return -EINVAL;
    }
    if (normalized) *normalized = f->get(scratch);
    return 0;
  } catch (...) {
    return -ENOMEM;
  }
}

int apply_settings(Config& cfg, const char* set, std::vector<SettingOutcome>* out) noexcept {
  if (set == nullptr) return 0;
  try {
    int applied = 0;
    std::string_view rest(set);
    while (!rest.empty()) {
      const size_t semi = rest.find(';');
      const std::string_view item = trim(rest.substr(0, semi));
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
      SettingOutcome o;
      if (item.empty() || !outcome_of(cfg, item, &o)) continue;
      applied += o.applied ? 1 : 0;
      if (out) out->push_back(std::move(o));
    }
    return applied;
  } catch (...) {
    return -ENOMEM;
  }
}

void report_settings(const std::vector<SettingOutcome>& tried) noexcept {
  try {
    for (const SettingOutcome& o : tried) {
      const std::string text = o.mark();
      stallscope_mark(text.c_str());
      internal::note_text("stallscope: ", text.c_str());
    }
  } catch (...) {
    // Out of memory while reporting: the settings stay applied.
  }
}

}  // namespace stallscope::loader
