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
 * With REDWOOD_ALLOC_ORIGINS=FILE it also says where each allocation comes from: the first frame
 * of its call stack (glibc's backtrace) outside the C and C++ runtimes names the object whose code
 * asked for it, the program itself (inlined standard containers count as the program's) or a
 * library (oneDNN, FFmpeg, OpenCV...), and at exit "COUNT PROGRAM OBJECT" lines are appended to
 * FILE. Unwinding costs a few microseconds an allocation; the plain count costs nothing.
 *
 * The real functions come from glibc's __libc_* entry points, so no dlsym (which itself may
 * allocate) is needed. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <link.h>
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

/* ---- origins (REDWOOD_ALLOC_ORIGINS) ---- */

enum { kMaxObjects = 256, kMaxFrames = 24 };
struct Object {
  uintptr_t start, end; /* the object's executable segment */
  char name[96];        /* its file's base name; the program's own is "(program)" */
  int runtime;          /* libc, libstdc++, libgcc_s, this counter: not an origin */
};
static struct Object objects[kMaxObjects];
static atomic_int object_count;
static atomic_ullong from[kMaxObjects + 1]; /* the last: no known object */
static int origins_on = -1;                 /* -1: not yet read from the environment */
static __thread int in_hook;                /* an allocation made while attributing one */

static int add_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size, (void)data;
  int n = atomic_load(&object_count);
  if (n >= kMaxObjects) return 1;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    struct Object* o = &objects[n];
    o->start = info->dlpi_addr + ph->p_vaddr;
    o->end = o->start + ph->p_memsz;
    const char* path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "(program)";
    const char* base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(o->name, sizeof o->name, "%s", base);
    o->runtime = strncmp(base, "libc.so", 7) == 0 || strncmp(base, "libstdc++", 9) == 0 || strncmp(base, "libgcc_s", 8) == 0 ||
                 strstr(base, "alloc_counter") != NULL || strncmp(base, "ld-linux", 8) == 0;
    atomic_store(&object_count, ++n);
    break;
  }
  return 0;
}

static int object_of(uintptr_t pc) {
  const int n = atomic_load(&object_count);
  for (int i = 0; i < n; ++i) {
    if (pc >= objects[i].start && pc < objects[i].end) return i;
  }
  return -1;
}

static void attribute(void) {
  in_hook = 1;
  if (atomic_load(&object_count) == 0) {
    static atomic_flag scanning = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&scanning)) dl_iterate_phdr(add_object, NULL);
  }
  void* frames[kMaxFrames];
  const int depth = backtrace(frames, kMaxFrames);
  int origin = kMaxObjects;
  for (int i = 1; i < depth; ++i) {
    const int o = object_of((uintptr_t)frames[i]);
    if (o >= 0 && !objects[o].runtime) {
      origin = o;
      break;
    }
  }
  atomic_fetch_add_explicit(&from[origin], 1, memory_order_relaxed);
  in_hook = 0;
}

static inline void count(void) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  if (origins_on == -1) {
    const char* f = getenv("REDWOOD_ALLOC_ORIGINS");
    origins_on = f && *f;
  }
  if (origins_on && !in_hook) attribute();
}

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
  const char* origins = getenv("REDWOOD_ALLOC_ORIGINS");
  FILE* o = origins && *origins ? fopen(origins, "a") : NULL;
  if (!o) return;
  const int objects_seen = atomic_load(&object_count);
  for (int i = 0; i <= kMaxObjects; ++i) {
    const unsigned long long k = atomic_load(&from[i]);
    if (k == 0 || (i < kMaxObjects && i >= objects_seen)) continue;
    fprintf(o, "%llu %s %s\n", k, name, i < kMaxObjects ? objects[i].name : "(unknown)");
  }
  fclose(o);
}
