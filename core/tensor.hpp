#pragma once
// Tensor: a typed, shaped, strided view of memory on one device. A tensor either owns its
// storage (shared between copies of the handle, freed with the last one) or views memory that
// someone else keeps alive. Copying a Tensor copies the handle, not the data; clone() copies data.

#include "core/dtype.hpp"
#include "core/recycling_allocator.hpp"
#include "core/shape.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace redwood {

enum class Device : std::uint8_t { kCpu, kCuda };
/// Throws InvalidArgument unless a tensor of numel elements is given exactly `values` values.
void check_size_matches(std::int64_t numel, std::size_t values);
std::string_view device_name(Device d);

/// A block of memory and how to give it back. Owning storage frees in its destructor.
class Storage {
 public:
  using Deleter = void (*)(void*);
  Storage(void* data, std::size_t bytes, Device device, Deleter deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(deleter) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool owning() const { return deleter_ != nullptr; }

  /// 64-byte aligned host memory (cache line, and enough for AVX-512 loads).
  static std::shared_ptr<Storage> allocate_host(std::size_t bytes);

 private:
  void* data_;
  std::size_t bytes_;
  Device device_;
  Deleter deleter_;
};

class Tensor {
 public:
  /// An undefined tensor (an absent optional input, say).
  Tensor() = default;

  /// Allocates an owning, contiguous host tensor; contents are uninitialized.
  static Tensor empty(DType dtype, Shape shape);
  /// Allocates an owning, contiguous host tensor filled with zero bytes.
  static Tensor zeros(DType dtype, Shape shape);
  /// Views memory owned elsewhere (contiguous unless strides are given).
  static Tensor view(void* data, DType dtype, Shape shape, Strides strides = {},
                     Device device = Device::kCpu);
  /// A contiguous tensor over the first bytes of `storage` (any device), sharing its ownership;
  /// how device backends (backends/cuda) make owning device tensors.
  static Tensor from_storage(std::shared_ptr<Storage> storage, DType dtype, Shape shape);
  /// A contiguous tensor over `bytes` at `data` on `device`, allocated by someone else (a pool):
  /// `release(data)` runs once, when the last tensor sharing it goes. A template, so that the
  /// release travels in the shared pointer's control block, one block with the storage, recycled
  /// (core/recycling_allocator.hpp): no heap allocation once warm.
  template <typename Release>
  static Tensor adopt(void* data, std::size_t bytes, Device device, DType dtype, Shape shape, Release release);
  /// Copies values into a new owning tensor.
  template <typename T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values);
  /// A 0-d tensor holding one value.
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector<T>({}, std::vector<T>{value});
  }

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  std::int64_t rank() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t dim(std::int64_t i) const;  // negative counts from the back
  std::int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  bool owns_data() const { return storage_ && storage_->owning(); }

  void* raw_data() const { return data_; }
  template <typename T>
  T* data() const {
    check_type(dtype_of<T>);
    return static_cast<T*>(data_);
  }
  /// The elements as a span (contiguous tensors only).
  template <typename T>
  std::span<T> values() const {
    check_contiguous();
    return {data<T>(), static_cast<std::size_t>(numel())};
  }

  /// Same data, new shape (contiguous tensors only; element count must match).
  Tensor reshaped(Shape shape) const;
  /// Rows [begin, begin + count) of dim 0 (contiguous tensors only): a view sharing this
  /// tensor's storage and ownership, so the rows keep the whole buffer alive.
  Tensor rows(std::int64_t begin, std::int64_t count) const;
  /// This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A contiguous, owning copy.
  Tensor clone() const;
  /// Converts every element to another dtype (float → int truncates toward zero, as ONNX Cast).
  Tensor cast(DType to) const;
  /// Reads element i (row-major over the shape, any strides) as double; for summaries and tests.
  double get_as_double(std::int64_t flat_index) const;
  /// Reads every element as int64 (integer tensors; for shape-like inputs such as Reshape's).
  std::vector<std::int64_t> to_int64_vector() const;
  /// Reads every element as float.
  std::vector<float> to_float_vector() const;

  /// "float[1, 3, 640, 640]".
  std::string description() const;

 private:
  void check_type(DType wanted) const;
  void check_contiguous() const;

  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::kUndefined;
  Device device_ = Device::kCpu;
  Shape shape_;
  Strides strides_;
};

namespace detail {
// Storage's own deleter is a plain function pointer without context: adopted storage is given back
// by the derived object's destructor, and this one only marks the storage as owning.
inline void released_by_shared_ptr(void*) {}

// Adopted storage: the storage, its release and the shared pointer's count in one block, which
// a RecyclingAllocator keeps for the next (a pool tensor per frame costs no heap allocation).
template <typename Release>
class AdoptedStorage final : public Storage {
 public:
  AdoptedStorage(void* data, std::size_t bytes, Device device, Release release)
      : Storage(data, bytes, device, &released_by_shared_ptr), release_(std::move(release)) {}
  ~AdoptedStorage() { release_(data()); }

 private:
  Release release_;
};
}  // namespace detail

template <typename Release>
Tensor Tensor::adopt(void* data, std::size_t bytes, Device device, DType dtype, Shape shape, Release release) {
  std::shared_ptr<Storage> storage = std::allocate_shared<detail::AdoptedStorage<Release>>(
      RecyclingAllocator<detail::AdoptedStorage<Release>>(), data, bytes, device, std::move(release));
  return from_storage(std::move(storage), dtype, std::move(shape));
}

template <typename T>
Tensor Tensor::from_vector(Shape shape, const std::vector<T>& values) {
  Tensor t = empty(dtype_of<T>, std::move(shape));
  check_size_matches(t.numel(), values.size());
  T* out = t.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

}  // namespace redwood
