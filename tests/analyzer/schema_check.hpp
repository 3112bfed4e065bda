// A validator for the subset of JSON Schema that docs/report-schema.json
// uses: type, required, properties, additionalProperties (a schema), items,
// minItems, maxItems, const, enum. Returns one message per violation, each
// naming the JSON pointer of the offending value.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stallscope::testing {

using nlohmann::json;

inline bool type_ok(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  return false;
}

inline void check_schema(const json& s, const json& v, const std::string& at, std::vector<std::string>& errs) {
  if (s.contains("const") && v != s["const"]) errs.push_back(at + ": expected " + s["const"].dump());
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
    errs.push_back(at + ": " + v.dump() + " not one of " + s["enum"].dump());
  if (s.contains("type") && !type_ok(v, s["type"])) {
    errs.push_back(at + ": not of type " + s["type"].get<std::string>());
    return;
  }
  if (v.is_object()) {
    for (const auto& k : s.value("required", json::array()))
      if (!v.contains(k)) errs.push_back(at + ": missing required key '" + k.get<std::string>() + "'");
    for (const auto& [k, sub] : v.items()) {
      const std::string p = at + "/" + k;
      if (s.contains("properties") && s["properties"].contains(k)) check_schema(s["properties"][k], sub, p, errs);
      else if (s.contains("additionalProperties")) check_schema(s["additionalProperties"], sub, p, errs);
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) errs.push_back(at + ": too few items");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) errs.push_back(at + ": too many items");
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) check_schema(s["items"], v[i], at + "/" + std::to_string(i), errs);
  }
}

inline std::vector<std::string> validate(const json& schema, const json& doc) {
  std::vector<std::string> errs;
  check_schema(schema, doc, "", errs);
  return errs;
}

}  // namespace stallscope::testing
