#include "core/tensor.hpp"

#include "core/error.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <new>

namespace redwood {

std::string_view device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

void check_size_matches(std::int64_t numel, std::size_t values) {
  RW_EXPECTS(static_cast<std::size_t>(numel) == values, InvalidArgument,
             "{} values given for a tensor of {} elements", values, numel);
}

Storage::~Storage() {
  if (deleter_ && data_) deleter_(data_);
}

std::shared_ptr<Storage> Storage::allocate_host(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) throw std::bad_alloc();
  return std::make_shared<Storage>(p, bytes, Device::kCpu, [](void* q) { std::free(q); });
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  RW_EXPECTS(dtype != DType::kUndefined, InvalidArgument, "cannot allocate a tensor of undefined dtype");
  for (auto d : shape) {
    RW_EXPECTS(d >= 0, InvalidArgument, "cannot allocate a tensor of shape {}", shape_str(shape));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  try {
    t.storage_ = Storage::allocate_host(t.nbytes());
  } catch (const std::bad_alloc&) {
    throw InvalidArgument(fmt::format("cannot allocate {} bytes for a tensor of {}: out of memory", t.nbytes(),
                                      t.description()));
  }
  t.data_ = t.storage_->data();
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, DType dtype, Shape shape) {
  RW_EXPECTS(storage != nullptr, InvalidArgument, "cannot wrap null storage as a tensor");
  RW_EXPECTS(dtype != DType::kUndefined, InvalidArgument, "cannot wrap storage as a tensor of undefined dtype");
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  RW_EXPECTS(bytes <= storage->bytes(), InvalidArgument, "{} {} needs {} bytes, the storage holds {}",
             dtype_name(dtype), shape_str(shape), bytes, storage->bytes());
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = storage->device();
  t.data_ = storage->data();
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::view(void* data, DType dtype, Shape shape, Strides strides, Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = device;
  t.data_ = data;
  t.strides_ = strides.empty() ? contiguous_strides(shape) : std::move(strides);
  t.shape_ = std::move(shape);
  return t;
}

std::int64_t Tensor::dim(std::int64_t i) const {
  return shape_.at(static_cast<std::size_t>(normalize_axis(i, rank())));
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

void Tensor::check_type(DType wanted) const {
  RW_EXPECTS(dtype_ == wanted, InvalidArgument, "tensor holds {}, read as {}", dtype_name(dtype_),
             dtype_name(wanted));
}

void Tensor::check_contiguous() const {
  RW_EXPECTS(is_contiguous(), InvalidArgument, "tensor {} is not contiguous", description());
}

Tensor Tensor::reshaped(Shape shape) const {
  check_contiguous();
  RW_EXPECTS(shape_numel(shape) == numel(), InvalidArgument, "cannot reshape {} to {}",
             description(), shape_str(shape));
  Tensor t = *this;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t count) const {
  check_contiguous();
  RW_EXPECTS(rank() >= 1 && begin >= 0 && count >= 0 && begin + count <= shape_[0], InvalidArgument,
             "rows [{}, {}) of {}: out of range", begin, begin + count, description());
  const std::size_t row_bytes = shape_[0] > 0 ? nbytes() / static_cast<std::size_t>(shape_[0]) : 0;
  Tensor t = *this;
  t.data_ = static_cast<std::byte*>(data_) + row_bytes * static_cast<std::size_t>(begin);
  t.shape_[0] = count;
  t.strides_ = contiguous_strides(t.shape_);
  return t;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

namespace {
// Row-major walk over a strided tensor, calling fn(flat_index, byte_offset).
template <typename Fn>
void for_each_offset(const Shape& shape, const Strides& strides, std::size_t elem, Fn fn) {
  const std::int64_t n = shape_numel(shape);
  if (n == 0) return;
  std::vector<std::int64_t> idx(shape.size(), 0);
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    fn(i, off * static_cast<std::int64_t>(elem));
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

double load_as_double(DType t, const std::byte* p) {
  switch (t) {
    case DType::kF32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kF16: { Half v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::kBF16: { BFloat16 v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case DType::kI64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::kI32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kU8: return static_cast<double>(*reinterpret_cast<const std::uint8_t*>(p));
    case DType::kBool: return *reinterpret_cast<const std::uint8_t*>(p) ? 1.0 : 0.0;
    case DType::kUndefined: break;
  }
  throw InvalidArgument("read of an undefined tensor");
}

// Float to integer conversion saturates and maps NaN to 0: a plain static_cast is undefined
// behaviour for values the integer cannot hold.
template <typename I>
I saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void store_from_double(DType t, std::byte* p, double v) {
  switch (t) {
    case DType::kF32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::kF16: { Half h = float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); return; }
    case DType::kBF16: { BFloat16 b = float_to_bf16(static_cast<float>(v)); std::memcpy(p, &b, 2); return; }
    case DType::kI64: { auto i = saturate<std::int64_t>(v); std::memcpy(p, &i, 8); return; }
    case DType::kI32: { auto i = saturate<std::int32_t>(v); std::memcpy(p, &i, 4); return; }
    case DType::kU8: *reinterpret_cast<std::uint8_t*>(p) = static_cast<std::uint8_t>(saturate<std::int64_t>(v)); return;
    case DType::kBool: *reinterpret_cast<std::uint8_t*>(p) = v != 0.0 ? 1 : 0; return;
    case DType::kUndefined: break;
  }
  throw InvalidArgument("write of an undefined tensor");
}
}  // namespace

Tensor Tensor::clone() const {
  RW_EXPECTS(device_ == Device::kCpu, InvalidArgument, "clone() of a {} tensor on the host", device_name(device_));
  Tensor out = empty(dtype_, shape_);
  const std::size_t elem = dtype_size(dtype_);
  if (is_contiguous()) {
    std::memcpy(out.data_, data_, nbytes());
    return out;
  }
  auto* dst = static_cast<std::byte*>(out.data_);
  const auto* src = static_cast<const std::byte*>(data_);
  for_each_offset(shape_, strides_, elem, [&](std::int64_t i, std::int64_t off) {
    std::memcpy(dst + i * static_cast<std::int64_t>(elem), src + off, elem);
  });
  return out;
}

Tensor Tensor::cast(DType to) const {
  if (to == dtype_) return clone();
  Tensor out = empty(to, shape_);
  const std::size_t in_elem = dtype_size(dtype_);
  const std::size_t out_elem = dtype_size(to);
  auto* dst = static_cast<std::byte*>(out.data_);
  const auto* src = static_cast<const std::byte*>(data_);
  // int64 goes through double exactly only up to 2^53; copy integers directly to keep them exact.
  const bool int_to_int = !is_floating(dtype_) && !is_floating(to) && to != DType::kBool;
  for_each_offset(shape_, strides_, in_elem, [&](std::int64_t i, std::int64_t off) {
    std::byte* d = dst + i * static_cast<std::int64_t>(out_elem);
    if (int_to_int) {
      std::int64_t v = 0;
      switch (dtype_) {
        case DType::kI64: std::memcpy(&v, src + off, 8); break;
        case DType::kI32: { std::int32_t x; std::memcpy(&x, src + off, 4); v = x; break; }
        default: v = *reinterpret_cast<const std::uint8_t*>(src + off); break;
      }
      switch (to) {
        case DType::kI64: std::memcpy(d, &v, 8); break;
        case DType::kI32: { auto x = static_cast<std::int32_t>(v); std::memcpy(d, &x, 4); break; }
        default: *reinterpret_cast<std::uint8_t*>(d) = static_cast<std::uint8_t>(v); break;
      }
    } else {
      store_from_double(to, d, load_as_double(dtype_, src + off));
    }
  });
  return out;
}

double Tensor::get_as_double(std::int64_t flat_index) const {
  RW_EXPECTS(flat_index >= 0 && flat_index < numel(), InvalidArgument, "index {} outside {}",
             flat_index, description());
  std::int64_t off = 0;
  std::int64_t rem = flat_index;
  for (std::size_t d = shape_.size(); d-- > 0;) {
    off += (rem % shape_[d]) * strides_[d];
    rem /= shape_[d];
  }
  return load_as_double(dtype_, static_cast<const std::byte*>(data_) +
                                    off * static_cast<std::int64_t>(dtype_size(dtype_)));
}

std::vector<std::int64_t> Tensor::to_int64_vector() const {
  Tensor c = dtype_ == DType::kI64 ? contiguous() : cast(DType::kI64);
  const auto* p = static_cast<const std::int64_t*>(c.data_);
  return {p, p + c.numel()};
}

std::vector<float> Tensor::to_float_vector() const {
  Tensor c = dtype_ == DType::kF32 ? contiguous() : cast(DType::kF32);
  const auto* p = static_cast<const float*>(c.data_);
  return {p, p + c.numel()};
}

std::string Tensor::description() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

}  // namespace redwood
