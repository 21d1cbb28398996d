#include "core/graph/graph_hash.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <variant>

namespace redwood {
namespace {

// XXH64's primes and steps, as xxHash's specification (doc/xxhash_spec.md) gives them.
constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr std::uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr std::uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr std::uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr std::uint64_t kP5 = 0x27D4EB2F165667C5ull;

static_assert(std::endian::native == std::endian::little, "the hash reads words as little-endian");

std::uint64_t read64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::uint32_t read32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

std::uint64_t xxh_round(std::uint64_t acc, std::uint64_t input) {
  acc += input * kP2;
  acc = std::rotl(acc, 31);
  return acc * kP1;
}

std::uint64_t merge_round(std::uint64_t acc, std::uint64_t lane) {
  acc ^= xxh_round(0, lane);
  return acc * kP1 + kP4;
}

}  // namespace

ContentHash::ContentHash(std::uint64_t seed)
    : lanes_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1}, seed_(seed), buffer_{} {}

void ContentHash::consume_stripe(const unsigned char* stripe) {
  for (int i = 0; i < 4; ++i) lanes_[i] = xxh_round(lanes_[i], read64(stripe + 8 * i));
}

void ContentHash::update(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (buffered_ > 0) {
    const std::size_t take = std::min(bytes, sizeof(buffer_) - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    bytes -= take;
    if (buffered_ < sizeof(buffer_)) return;
    consume_stripe(buffer_);
    buffered_ = 0;
  }
  for (; bytes >= 32; p += 32, bytes -= 32) consume_stripe(p);
  std::memcpy(buffer_, p, bytes);
  buffered_ = bytes;
}

void ContentHash::add(std::string_view text) {
  add(static_cast<std::int64_t>(text.size()));
  update(text.data(), text.size());
}

void ContentHash::add(std::int64_t value) { update(&value, sizeof(value)); }

void ContentHash::add(const Tensor& tensor) {
  add(static_cast<std::int64_t>(tensor.dtype()));
  add(static_cast<std::int64_t>(tensor.shape().size()));
  for (std::int64_t d : tensor.shape()) add(d);
  const Tensor c = tensor.contiguous();
  add(static_cast<std::int64_t>(c.nbytes()));
  if (c.nbytes() > 0) update(c.raw_data(), c.nbytes());
}

std::uint64_t ContentHash::digest() const {
  std::uint64_t h;
  if (total_ >= 32) {
    h = std::rotl(lanes_[0], 1) + std::rotl(lanes_[1], 7) + std::rotl(lanes_[2], 12) + std::rotl(lanes_[3], 18);
    for (std::uint64_t lane : lanes_) h = merge_round(h, lane);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  const unsigned char* p = buffer_;
  std::size_t left = buffered_;
  for (; left >= 8; p += 8, left -= 8) {
    h ^= xxh_round(0, read64(p));
    h = std::rotl(h, 27) * kP1 + kP4;
  }
  if (left >= 4) {
    h ^= static_cast<std::uint64_t>(read32(p)) * kP1;
    h = std::rotl(h, 23) * kP2 + kP3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left) {
    h ^= *p * kP5;
    h = std::rotl(h, 11) * kP1;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

std::uint64_t xxh64(const void* data, std::size_t bytes) {
  ContentHash h;
  h.update(data, bytes);
  return h.digest();
}

namespace {

void add_value_info(ContentHash& h, const ValueInfo& v) {
  h.add(v.name);
  h.add(static_cast<std::int64_t>(v.dtype));
  h.add(static_cast<std::int64_t>(v.onnx_type));
  h.add(static_cast<std::int64_t>(v.has_shape));
  h.add(static_cast<std::int64_t>(v.dims.size()));
  for (const Dim& d : v.dims) {
    h.add(d.value);
    h.add(d.symbol);
  }
}

void add_attribute(ContentHash& h, const AttributeValue& value) {
  h.add(static_cast<std::int64_t>(value.index()));  // an int 1 and a float 1 differ
  std::visit(
      [&h](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          h.add(v);
        } else if constexpr (std::is_same_v<T, float>) {
          h.add(static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(v)));
        } else if constexpr (std::is_same_v<T, std::string>) {
          h.add(v);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          h.add(v);
        } else {  // a list: its length, then each element
          h.add(static_cast<std::int64_t>(v.size()));
          for (const auto& e : v) {
            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, float>) {
              h.add(static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(e)));
            } else {
              h.add(e);
            }
          }
        }
      },
      value);
}

void add_node(ContentHash& h, const Node& node) {
  h.add(node.name);
  h.add(node.op_type);
  h.add(node.domain);
  h.add(static_cast<std::int64_t>(node.inputs.size()));
  for (const std::string& in : node.inputs) h.add(in);
  h.add(static_cast<std::int64_t>(node.outputs.size()));
  for (const std::string& out : node.outputs) h.add(out);
  h.add(static_cast<std::int64_t>(node.attributes.size()));
  for (const auto& [key, value] : node.attributes) {  // a std::map: in key order
    h.add(key);
    add_attribute(h, value);
  }
  h.add(static_cast<std::int64_t>(node.body.size()));
  for (const Node& inner : node.body) add_node(h, inner);
}

}  // namespace

std::uint64_t graph_hash(const Graph& graph) {
  ContentHash h;
  h.add(std::string_view("redwood graph 1"));  // the layout of what follows; bump it when that changes
  h.add(graph.opset);
  h.add(graph.name);
  h.add(static_cast<std::int64_t>(graph.inputs.size()));
  for (const ValueInfo& v : graph.inputs) add_value_info(h, v);
  h.add(static_cast<std::int64_t>(graph.outputs.size()));
  for (const ValueInfo& v : graph.outputs) add_value_info(h, v);
  h.add(static_cast<std::int64_t>(graph.nodes.size()));
  for (const Node& node : graph.nodes) add_node(h, node);
  h.add(static_cast<std::int64_t>(graph.initializers.size()));
  for (const auto& [name, tensor] : graph.initializers) {  // a std::map: in name order
    h.add(name);
    h.add(tensor);
  }
  return h.digest();
}

std::string hash_hex(std::uint64_t hash) { return fmt::format("{:016x}", hash); }

}  // namespace redwood
