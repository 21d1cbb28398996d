#pragma once
// A map that keeps at most `capacity` entries and, when full, evicts the least recently used
// (found or inserted) to take a new one. For caches keyed by what arrives at run time (plans per
// input shape): a stream of ever-new shapes holds `capacity` entries, not one per shape seen.
// Not thread-safe (callers lock). Values are usually shared_ptrs, so an entry evicted while a run
// still uses it lives until that run lets go.

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

namespace redwood {

template <typename K, typename V>
class LruMap {
 public:
  explicit LruMap(std::size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  /// The value under `key`, marked as just used; nullptr when absent.
  V* find(const K& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    it->second.used = ++tick_;
    return &it->second.value;
  }

  /// Stores `value` under `key` (replacing one there), evicting the least recently used entry
  /// first when the map is full.
  void insert(K key, V value) {
    if (auto it = entries_.find(key); it != entries_.end()) {
      it->second = Entry{std::move(value), ++tick_};
      return;
    }
    if (entries_.size() >= capacity_) {
      auto oldest = entries_.begin();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.used < oldest->second.used) oldest = it;
      }
      entries_.erase(oldest);
      ++evictions_;
    }
    entries_.emplace(std::move(key), Entry{std::move(value), ++tick_});
  }

  void erase(const K& key) { entries_.erase(key); }
  void clear() { entries_.clear(); }
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }
  std::uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    V value;
    std::uint64_t used;
  };
  std::map<K, Entry> entries_;
  std::size_t capacity_;
  std::uint64_t tick_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace redwood
