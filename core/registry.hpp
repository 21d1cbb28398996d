#pragma once
// Registry<Factory>: factories by name, filled by static registration where each kind of thing is
// defined (stages, sources, sinks: stages/; device runners: the backends), read by the loaders.
// One name is registered once: a second registration of it throws Error naming the kind and the
// name, as the op registry does for a kernel (core/op_registry.hpp). At static initialization
// that ends the process with the message before main runs: two definitions of one name is a
// build's mistake, not something to settle by whichever registers last.
//
// Reads are map-like (find, at, count, iteration in name order), so a loader lists the names it
// knows in its error messages. Registration happens before main; reads after it, so neither
// locks.

#include "core/error.hpp"

#include <fmt/format.h>

#include <map>
#include <string>
#include <utility>

namespace redwood {

template <class Factory>
class Registry {
 public:
  using Map = std::map<std::string, Factory>;
  using const_iterator = typename Map::const_iterator;

  /// `kind` names what it holds in messages: "stage", "source", "device runner".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  /// Adds `factory` under `name`; throws Error when the name is taken. Returns true, for the
  /// registration macros' static flags.
  bool add(const std::string& name, Factory factory) {
    RW_EXPECTS(!name.empty(), Error, "a {} is registered without a name", kind_);
    const bool added = entries_.emplace(name, std::move(factory)).second;
    RW_EXPECTS(added, Error, "{} '{}' is registered twice (two definitions of one name are linked)", kind_, name);
    return true;
  }

  const_iterator find(const std::string& name) const { return entries_.find(name); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  std::size_t count(const std::string& name) const { return entries_.count(name); }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// The factory registered under `name`; throws Unsupported naming the kind, the name and the
  /// names there are.
  const Factory& at(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) {
      std::string known;
      for (const auto& [n, f] : entries_) known += (known.empty() ? "" : ", ") + n;
      throw Unsupported(fmt::format("no {} named '{}' (known: {})", kind_, name, known.empty() ? "none" : known));
    }
    return it->second;
  }
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  Map entries_;
};

}  // namespace redwood
