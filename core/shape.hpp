#pragma once
// Shapes are vectors of extents; helpers for element counts, contiguous strides, numpy-style
// broadcasting and printing.
//
// Shape keeps up to eight extents in place and only a longer one on the heap: a tensor handle
// (shape and strides) is made and copied on every kernel call of every frame, and with
// std::vector each of those was two heap allocations. It has std::vector's interface (what
// Redwood uses of it) and converts to and from std::vector<std::int64_t> implicitly.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

namespace redwood {

class Shape {
 public:
  static constexpr std::size_t kInline = 8;
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = std::int64_t&;
  using const_reference = const std::int64_t&;
  using pointer = std::int64_t*;
  using const_pointer = const std::int64_t*;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  Shape() noexcept {}  // user-provided: a const Shape (or a struct holding one) may be default-made
  Shape(std::initializer_list<std::int64_t> values) { assign(values.begin(), values.end()); }
  explicit Shape(size_type n, std::int64_t value = 0) { assign(n, value); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<std::int64_t>& values) { assign(values.begin(), values.end()); }  // NOLINT: implicit
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      free_heap();
      take(other);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<std::int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~Shape() { free_heap(); }

  operator std::vector<std::int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return capacity_; }
  std::int64_t* data() noexcept { return data_; }
  const std::int64_t* data() const noexcept { return data_; }
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  std::int64_t& operator[](size_type i) noexcept { return data_[i]; }
  const std::int64_t& operator[](size_type i) const noexcept { return data_[i]; }
  std::int64_t& at(size_type i);
  const std::int64_t& at(size_type i) const;
  std::int64_t& front() noexcept { return data_[0]; }
  const std::int64_t& front() const noexcept { return data_[0]; }
  std::int64_t& back() noexcept { return data_[size_ - 1]; }
  const std::int64_t& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_type n) {
    if (n > capacity_) grow(n);
  }
  void clear() noexcept { size_ = 0; }
  void push_back(std::int64_t v) {
    if (size_ == capacity_) grow(capacity_ * 2);
    data_[size_++] = v;
  }
  template <typename... Args>
  std::int64_t& emplace_back(Args&&... args) {
    push_back(std::int64_t(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() noexcept { --size_; }
  void resize(size_type n, std::int64_t value = 0) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) data_[i] = value;
    size_ = static_cast<std::uint32_t>(n);
  }
  void assign(size_type n, std::int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    const auto n = static_cast<size_type>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::int64_t* out = data_;
    for (; first != last; ++first) *out++ = static_cast<std::int64_t>(*first);
    size_ = static_cast<std::uint32_t>(n);
  }
  iterator insert(const_iterator pos, std::int64_t value) { return insert(pos, size_type{1}, value); }
  iterator insert(const_iterator pos, size_type count, std::int64_t value);
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    const Shape items(first, last);  // first..last may be this shape's own extents
    const auto at = static_cast<size_type>(pos - data_);
    open_gap(at, items.size());
    std::copy(items.begin(), items.end(), data_ + at);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<std::int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last);

  friend bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Shape& a, const Shape& b) noexcept { return !(a == b); }
  friend bool operator<(const Shape& a, const Shape& b) noexcept {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator>(const Shape& a, const Shape& b) noexcept { return b < a; }
  friend bool operator<=(const Shape& a, const Shape& b) noexcept { return !(b < a); }
  friend bool operator>=(const Shape& a, const Shape& b) noexcept { return !(a < b); }

 private:
  void grow(size_type n);
  void open_gap(size_type at, size_type count);
  void free_heap() noexcept {
    if (data_ != inline_) delete[] data_;
    data_ = inline_;
    capacity_ = kInline;
  }
  void take(Shape& other) noexcept {
    if (other.data_ == other.inline_) {
      std::copy(other.inline_, other.inline_ + other.size_, inline_);
      data_ = inline_;
      capacity_ = kInline;
    } else {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInline;
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  std::int64_t* data_ = inline_;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
  std::int64_t inline_[kInline];
};

using Strides = Shape;

/// The most elements a tensor may have: 2^56, so that its size in bytes fits in 64 bits
/// whatever its element type.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 56;
/// Product of the extents (1 for a scalar); throws InvalidArgument, naming the shape, when it
/// exceeds kMaxElements (a crafted shape whose product wraps around must not size a buffer).
std::int64_t shape_numel(const Shape& shape);
/// Row-major strides in elements.
Strides contiguous_strides(const Shape& shape);
/// "[1, 3, 640, 640]".
std::string shape_str(const Shape& shape);
/// Multidirectional (numpy) broadcast of two shapes; throws InvalidArgument when they do not
/// broadcast, naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Normalizes a possibly negative axis against a rank; throws InvalidArgument when out of range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank);

}  // namespace redwood
