/* alloc_counter: an LD_PRELOAD library that counts the heap allocations of a whole process
 * (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc; C++'s operator new
 * comes through malloc) and, at exit, appends "COUNT PROGRAM" to the file named by
 * REDWOOD_ALLOC_COUNT (else writes it to stderr): every process that inherits the preload
 * (a wrapper script, `timeout`) adds its own line, and the reader takes the program's. The
 * steady-state test runs the same pipeline for two frame counts and divides the difference by
 * the frames between them (tests/pipelines/allocations_test.cpp).
 *
 *   LD_PRELOAD=build/lib/libredwood_alloc_counter.so REDWOOD_ALLOC_COUNT=/tmp/n redwood run ...
 *
 * The real functions come from glibc's __libc_* entry points, so no dlsym (which itself may
 * allocate) is needed. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);

static atomic_ullong allocations;

static inline void count(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  count();
  void* p = __libc_memalign(alignment, n);
  if (p == NULL && n != 0) return 12; /* ENOMEM */
  *out = p;
  return 0;
}
void* valloc(size_t n) {
  count();
  return __libc_valloc(n);
}

__attribute__((destructor)) static void report(void) {
  const unsigned long long n = atomic_load(&allocations);
  char exe[256] = "?";
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) exe[len] = 0;
  const char* name = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  const char* file = getenv("REDWOOD_ALLOC_COUNT");
  FILE* out = file && *file ? fopen(file, "a") : NULL;
  fprintf(out ? out : stderr, "%llu %s\n", n, name);
  if (out) fclose(out);
}
