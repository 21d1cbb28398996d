#pragma once
// RecyclingAllocator: a standard allocator whose single objects come from a free list of blocks
// of their size, kept for the life of the process. For the small bookkeeping made and freed for
// every frame: a shared pointer's control block (a pool tensor's storage, a pool picture's
// release, a recycled frame's handle), an OpenCV buffer's record. The first ones come from the
// heap; freed, they wait on the list for the next, so that in steady state (as many live at once
// as ever were) they cost no heap allocation. Arrays (n > 1) go to the heap as usual.
//
// One list per block type (the allocator rebinds to the control block's type), guarded by a
// mutex: allocation and release may happen on any thread.

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>

namespace redwood {

namespace detail {

/// Freed blocks of one type, linked through their first bytes.
template <typename T>
class BlockList {
 public:
  static BlockList& instance() {
    static BlockList* list = new BlockList();  // never destroyed: blocks may be freed during exit
    return *list;
  }
  void* pop() {
    std::lock_guard lock(mutex_);
    Node* n = head_;
    if (n != nullptr) head_ = n->next;
    return n;
  }
  void push(void* p) {
    std::lock_guard lock(mutex_);
    head_ = ::new (p) Node{head_};
  }

 private:
  struct Node {
    Node* next;
  };
  static_assert(sizeof(T) >= sizeof(Node) && alignof(T) >= alignof(Node), "a block must hold a link");
  std::mutex mutex_;
  Node* head_ = nullptr;
};

}  // namespace detail

template <typename T>
struct RecyclingAllocator {
  using value_type = T;

  RecyclingAllocator() noexcept = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  T* allocate(std::size_t n) {
    if (n == 1) {
      if (void* p = detail::BlockList<T>::instance().pop()) return static_cast<T*>(p);
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1) {
      detail::BlockList<T>::instance().push(p);
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }

  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace redwood
