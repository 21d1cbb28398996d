#include "runtime/plan_cache.hpp"

#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

namespace redwood::runtime {
namespace {

constexpr const char* kFormatName = "redwood plan cache";

const nlohmann::json& member(const nlohmann::json& object, const char* name, nlohmann::json::value_t type,
                             const char* type_name) {
  auto it = object.find(name);
  RW_EXPECTS(it != object.end(), InvalidArgument, "no \"{}\"", name);
  RW_EXPECTS(it->type() == type, InvalidArgument, "\"{}\" is not {}", name, type_name);
  return *it;
}

std::string string_member(const nlohmann::json& object, const char* name) {
  return member(object, name, nlohmann::json::value_t::string, "a string").get<std::string>();
}

// Checks the file's layout and key, then every pick: the first problem, thrown with where it is.
PlanCacheEntry parse_entry(const nlohmann::json& json, const PlanCacheKey* expected, const PickCheck& check) {
  RW_EXPECTS(json.is_object(), InvalidArgument, "not a JSON object");
  RW_EXPECTS(json.value("format", "") == kFormatName, InvalidArgument, "\"format\" is not \"{}\"", kFormatName);
  const nlohmann::json& version = member(json, "format_version", nlohmann::json::value_t::number_unsigned,
                                         "a non-negative integer");
  RW_EXPECTS(version.get<std::uint64_t>() == kPlanCacheFormat, InvalidArgument,
             "format version {}, this build reads version {} (stale)", version.get<std::uint64_t>(), kPlanCacheFormat);
  PlanCacheEntry entry;
  try {
    entry.key = PlanCacheKey::from_json(member(json, "key", nlohmann::json::value_t::object, "an object"));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("key: {}", e.what()));
  }
  if (expected != nullptr) {
    const std::string why = expected->difference(entry.key);
    RW_EXPECTS(why.empty(), InvalidArgument, "stale: made for another key ({})", why);
  }
  entry.model = json.value("model", "");
  entry.created = string_member(json, "created");
  const nlohmann::json& picks = member(json, "picks", nlohmann::json::value_t::object, "an object");
  for (const auto& [tuner, list] : picks.items()) {
    RW_EXPECTS(list.is_array(), InvalidArgument, "picks of \"{}\": not a list", tuner);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const nlohmann::json& pick = list[i];
      try {
        RW_EXPECTS(pick.is_object() && pick.contains("key") && pick["key"].is_object() && pick.contains("config") &&
                       pick["config"].is_object(),
                   InvalidArgument, "not an object with a \"key\" and a \"config\" object");
        RW_EXPECTS(!pick.contains("how") || pick["how"] == "measured" || pick["how"] == "default", InvalidArgument,
                   "\"how\" is {}, neither \"measured\" nor \"default\"", pick["how"].dump());
        if (check) check(tuner, pick);
        RW_EXPECTS(entry.picks.add(tuner, pick), InvalidArgument, "its key is there twice");
      } catch (const Error& e) {
        throw InvalidArgument(fmt::format("pick {} of \"{}\": {}", i, tuner, e.what()));
      }
    }
  }
  return entry;
}

}  // namespace


std::filesystem::path plan_cache_dir() { return cache_dir() / "plans"; }

// ---- PickSet ----

bool PickSet::add(const std::string& tuner, nlohmann::json pick) {
  RW_EXPECTS(pick.is_object() && pick.contains("key") && pick["key"].is_object(), InvalidArgument,
             "a pick of \"{}\" must be an object with a \"key\" object, not {}", tuner, pick.dump());
  std::string key = pick["key"].dump();  // nlohmann's objects keep their keys sorted: one text per key
  return picks_[tuner].emplace(std::move(key), std::move(pick)).second;
}

std::size_t PickSet::merge(const PickSet& other) {
  std::size_t added = 0;
  for (const auto& [tuner, picks] : other.picks_) {
    for (const auto& [key, pick] : picks) added += picks_[tuner].emplace(key, pick).second ? 1 : 0;
  }
  return added;
}

std::size_t PickSet::size() const {
  std::size_t n = 0;
  for (const auto& [tuner, picks] : picks_) n += picks.size();
  return n;
}

nlohmann::json PickSet::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [tuner, picks] : picks_) {
    nlohmann::json& list = out[tuner] = nlohmann::json::array();
    for (const auto& [key, pick] : picks) list.push_back(pick);
  }
  return out;
}

// ---- PickRecorder ----

namespace {
thread_local PickRecorder* current_recorder = nullptr;
}

PickRecorder::PickRecorder() : outer_(current_recorder) { current_recorder = this; }

PickRecorder::~PickRecorder() { current_recorder = outer_; }

void PickRecorder::record(const std::string& tuner, const std::function<nlohmann::json()>& pick, bool measured) {
  PickRecorder* r = current_recorder;
  if (r == nullptr) return;
  r->picks_.add(tuner, pick());
  if (measured) ++r->measured_;
}

// ---- PlanCacheKey ----

nlohmann::json PlanCacheKey::to_json() const {
  return {{"model_hash", model_hash}, {"device", device},   {"driver", driver},
          {"runtime", runtime},       {"redwood", redwood}, {"options", options}};
}

PlanCacheKey PlanCacheKey::from_json(const nlohmann::json& json) {
  RW_EXPECTS(json.is_object(), InvalidArgument, "not an object");
  PlanCacheKey key;
  key.model_hash = string_member(json, "model_hash");
  key.device = string_member(json, "device");
  key.driver = string_member(json, "driver");
  key.runtime = string_member(json, "runtime");
  key.redwood = string_member(json, "redwood");
  for (const auto& [name, value] : member(json, "options", nlohmann::json::value_t::object, "an object").items()) {
    RW_EXPECTS(value.is_string(), InvalidArgument, "option \"{}\" is not a string", name);
    key.options[name] = value.get<std::string>();
  }
  return key;
}

std::string PlanCacheKey::difference(const PlanCacheKey& file) const {
  const std::pair<const char*, const std::string PlanCacheKey::*> fields[] = {
      {"model hash", &PlanCacheKey::model_hash}, {"device", &PlanCacheKey::device},
      {"driver", &PlanCacheKey::driver},         {"runtime", &PlanCacheKey::runtime},
      {"Redwood version", &PlanCacheKey::redwood}};
  for (const auto& [name, field] : fields) {
    if (this->*field != file.*field) return fmt::format("{} '{}', here '{}'", name, file.*field, this->*field);
  }
  if (options != file.options) {
    return fmt::format("options {}, here {}", nlohmann::json(file.options).dump(), nlohmann::json(options).dump());
  }
  return "";
}

std::string PlanCacheKey::file_name() const {
  ContentHash h;
  for (const std::string* field : {&device, &driver, &runtime, &redwood}) h.add(*field);
  h.add(static_cast<std::int64_t>(options.size()));
  for (const auto& [name, value] : options) {
    h.add(name);
    h.add(value);
  }
  return fmt::format("{}-{}.json", model_hash, hash_hex(h.digest()));
}

// ---- the file ----

nlohmann::json plan_cache_json(const PlanCacheEntry& entry) {
  return {{"format", kFormatName},
          {"format_version", kPlanCacheFormat},
          {"key", entry.key.to_json()},
          {"model", entry.model},
          {"created", entry.created},
          {"picks", entry.picks.to_json()}};
}

EntryRead read_plan_cache_entry(const std::filesystem::path& file, const PlanCacheKey* expected,
                                const PickCheck& check) {
  EntryRead result;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    result.missing = true;
    return result;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    result.problem = "cannot be read";
    return result;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    result.entry = parse_entry(nlohmann::json::parse(text.str()), expected, check);
  } catch (const nlohmann::json::exception& e) {  // not JSON (a truncated file), or a field of another type
    result.problem = fmt::format("corrupt: {}", e.what());
  } catch (const std::exception& e) {
    result.problem = e.what();
  }
  return result;
}

void write_plan_cache_entry(const std::filesystem::path& file, const PlanCacheEntry& entry) {
  write_file_atomically(file, plan_cache_json(entry).dump(1) + "\n");
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// ---- ModelPlanCache ----

ModelPlanCache::ModelPlanCache(std::filesystem::path dir, PlanCacheKey key, std::string model, PickCheck check)
    : file_(std::move(dir) / key.file_name()), key_(std::move(key)), model_(std::move(model)), check_(std::move(check)) {}

void ModelPlanCache::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  EntryRead read = read_plan_cache_entry(file_, &key_, check_);
  if (read.entry) {
    picks_ = std::move(read.entry->picks);
    log().debug("plan cache: {}: {} tuned picks", file_.string(), picks_.size());
  } else if (!read.missing) {
    // The same problem with the same file is said once per process, however many runners read it.
    const std::string message =
        fmt::format("plan cache: {}: {}; not used, it is rebuilt by this run", file_.string(), read.problem);
    warn_once(message, message);
  }
}

PickSet ModelPlanCache::load() {
  std::lock_guard lock(mutex_);
  load_locked();
  return picks_;
}

std::size_t ModelPlanCache::add(const PickSet& picks) {
  std::lock_guard lock(mutex_);
  load_locked();
  const std::size_t added = picks_.merge(picks);
  if (added == 0) return 0;
  PlanCacheEntry entry{key_, model_, utc_now(), picks_};
  try {
    write_plan_cache_entry(file_, entry);
    log().debug("plan cache: {}: {} tuned picks written ({} new)", file_.string(), picks_.size(), added);
  } catch (const Error& e) {
    warn_once("plan cache: not written", fmt::format("plan cache: {}; the tuned picks are not kept for the next run", e.what()));
  }
  return added;
}

}  // namespace redwood::runtime
