#pragma once
// A fingerprint of a model's content, for caches that must tell models apart by what they
// compute, not by what they are called: the plan cache (runtime/plan_cache.hpp) keys its entries
// by it. Two models whose nodes and values share every name but whose weights differ in one byte
// get different hashes (ONNX Runtime's engine cache, keyed by names, once handed one model's
// engine to another).
//
// The hash is XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0), written out here in a few
// lines: it reads 8-byte words in four independent lanes, so that a model of 100 MB (ResNet-50)
// hashes in about 25 ms at load (the 2-core VM).

#include "core/graph/graph.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace redwood {

/// XXH64 over what is fed in, in order: update() takes raw bytes; add() frames a value (a length
/// before a string, a fixed width for numbers) so that ("ab", "c") and ("a", "bc") differ.
class ContentHash {
 public:
  explicit ContentHash(std::uint64_t seed = 0);
  void update(const void* data, std::size_t bytes);
  void add(std::string_view text);
  void add(std::int64_t value);
  void add(const Tensor& tensor);  // dtype, shape, then the elements' bytes
  /// The hash of everything fed so far (more may follow).
  std::uint64_t digest() const;

 private:
  void consume_stripe(const unsigned char* stripe);  // 32 bytes: one word per lane
  std::uint64_t lanes_[4];
  std::uint64_t seed_;
  std::uint64_t total_ = 0;
  unsigned char buffer_[32];
  std::size_t buffered_ = 0;
};

/// XXH64 of `bytes` bytes at `data` (seed 0).
std::uint64_t xxh64(const void* data, std::size_t bytes);

/// The hash of a graph's content: opset, name, inputs and outputs (names, types, dimensions),
/// every node (name, op, domain, inputs, outputs, attributes with tensor attributes' bytes, a
/// composite node's body) and every initializer (name, dtype, shape, bytes). Not the file it came
/// from (`source`), nor `value_info`, which shape inference derives from the rest.
std::uint64_t graph_hash(const Graph& graph);

/// 16 lower-case hex digits.
std::string hash_hex(std::uint64_t hash);

}  // namespace redwood
