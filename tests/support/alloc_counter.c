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
 * With REDWOOD_ALLOC_SITES=FILE as well, the program's own allocations are also counted by site:
 * the first four frames of the call stack inside the program, as offsets into it (what
 * `addr2line -f -C -i -e PROGRAM` reads), and at exit "COUNT PROGRAM OFFSET,OFFSET,..." lines are
 * appended to FILE (scripts/alloc_sites.sh names them).
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
  uintptr_t base;       /* where the object is loaded: a pc minus it is an offset into its file */
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
    o->base = info->dlpi_addr;
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

/* The program's allocation sites (REDWOOD_ALLOC_SITES): open addressing, a spin lock to insert. */
enum { kSiteFrames = 4, kMaxSites = 4096 };
struct Site {
  uintptr_t frames[kSiteFrames]; /* offsets into the program; 0 past the stack's end */
  atomic_ullong count;
};
static struct Site sites[kMaxSites];
static atomic_flag sites_lock = ATOMIC_FLAG_INIT;
static int sites_on = -1;
static atomic_ullong sites_dropped; /* the table was full */

static void count_site(void* const* frames, int depth, int first, const struct Object* program) {
  uintptr_t key[kSiteFrames] = {0};
  int k = 0;
  for (int i = first; i < depth && k < kSiteFrames; ++i) {
    const uintptr_t pc = (uintptr_t)frames[i];
    if (pc >= program->start && pc < program->end) key[k++] = pc - program->base;
  }
  unsigned long long h = 1469598103934665603ull;
  for (int i = 0; i < kSiteFrames; ++i) h = (h ^ key[i]) * 1099511628211ull;
  while (atomic_flag_test_and_set_explicit(&sites_lock, memory_order_acquire)) {
  }
  for (unsigned probe = 0; probe < kMaxSites; ++probe) {
    struct Site* s = &sites[(h + probe) % kMaxSites];
    if (atomic_load_explicit(&s->count, memory_order_relaxed) == 0) {
      memcpy(s->frames, key, sizeof key);
      atomic_store_explicit(&s->count, 1, memory_order_relaxed);
      atomic_flag_clear_explicit(&sites_lock, memory_order_release);
      return;
    }
    if (memcmp(s->frames, key, sizeof key) == 0) {
      atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
      atomic_flag_clear_explicit(&sites_lock, memory_order_release);
      return;
    }
  }
  atomic_flag_clear_explicit(&sites_lock, memory_order_release);
  atomic_fetch_add_explicit(&sites_dropped, 1, memory_order_relaxed);
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
  int at = 0;
  for (int i = 1; i < depth; ++i) {
    const int o = object_of((uintptr_t)frames[i]);
    if (o >= 0 && !objects[o].runtime) {
      origin = o;
      at = i;
      break;
    }
  }
  if (sites_on == -1) {
    const char* f = getenv("REDWOOD_ALLOC_SITES");
    sites_on = f && *f;
  }
  if (sites_on && origin < kMaxObjects && strcmp(objects[origin].name, "(program)") == 0) {
    count_site(frames, depth, at, &objects[origin]);
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
  const char* site_file = getenv("REDWOOD_ALLOC_SITES");
  FILE* sf = site_file && *site_file ? fopen(site_file, "a") : NULL;
  if (!sf) return;
  for (int i = 0; i < kMaxSites; ++i) {
    const unsigned long long k = atomic_load(&sites[i].count);
    if (k == 0) continue;
    fprintf(sf, "%llu %s ", k, name);
    for (int f = 0; f < kSiteFrames && sites[i].frames[f] != 0; ++f) fprintf(sf, "%s%#lx", f ? "," : "", (unsigned long)sites[i].frames[f]);
    fprintf(sf, "\n");
  }
  if (atomic_load(&sites_dropped) > 0) fprintf(sf, "%llu %s (dropped: the site table was full)\n", atomic_load(&sites_dropped), name);
  fclose(sf);
}
