// The fuzz targets' driver where there is no libFuzzer (GCC, the normal build): every file of a
// corpus folder, then a fixed number of deterministic mutations of them, through the target's
// LLVMFuzzerTestOneInput. A crash or any exception escaping the target (it lets only
// redwood::Error through) fails the run, naming the input and writing it where ctest ran
// (fuzz-failure-<n>.bin), so that `TARGET FILE` reproduces it.
//
//   redwood_fuzz_npy_replay CORPUS_DIR [--mutations N] [--seed S]   # replay a corpus
//   redwood_fuzz_npy_replay FILE...                                  # run these inputs only
//
// The mutations are what finds shallow bugs without coverage feedback: bit flips, truncations,
// inserted and duplicated bytes, and numbers made huge (a decimal run becomes one of
// kHugeDecimals, or bytes become 0xff... / 0x7f ff... / 0x80 00...: a varint or a fixed-width
// integer of the format). Each mutant stacks one to three of them. The address space is capped
// (kAddressSpace) outside sanitizer builds, so that a mutant's absurd size fails its allocation
// as it would on a small machine instead of taking the host's memory.

#include "fuzz/fuzz_target.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <typeinfo>
#include <unistd.h>
#include <vector>

#include <cxxabi.h>

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint64_t kAddressSpace = std::uint64_t{8} << 30;
const char* const kHugeDecimals[] = {"99999999999999999999999", "4294967296", "2147483648", "-1", "0",
                                     "9223372036854775807",     "1e308",      "-9223372036854775808"};

// What the signal handler prints: the input that was running.
char g_current[512] = "(none)";

void on_signal(int sig) {
  const char prefix[] = "\nreplay: fatal signal while running ";
  (void)!::write(2, prefix, sizeof prefix - 1);
  (void)!::write(2, g_current, std::strlen(g_current));
  (void)!::write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

Bytes read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void mutate_once(Bytes& b, std::mt19937_64& rng) {
  const auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  switch (rng() % 6) {
    case 0:  // flip a few bits
      for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n && !b.empty(); ++k) b[pick(b.size())] ^= 1u << (rng() % 8);
      break;
    case 1:  // truncate
      b.resize(pick(b.size() + 1));
      break;
    case 2: {  // insert random bytes
      Bytes extra(1 + rng() % 16);
      for (auto& x : extra) x = static_cast<std::uint8_t>(rng());
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), extra.begin(), extra.end());
      break;
    }
    case 3: {  // duplicate a chunk somewhere else
      if (b.empty()) break;
      const std::size_t from = pick(b.size()), len = 1 + pick(std::min<std::size_t>(b.size() - from, 64));
      const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + len));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), chunk.begin(), chunk.end());
      break;
    }
    case 4: {  // a decimal number made huge (or negative, or zero)
      std::vector<std::size_t> starts;
      for (std::size_t i = 0; i < b.size(); ++i) {
        if (std::isdigit(b[i]) && (i == 0 || !std::isdigit(b[i - 1]))) starts.push_back(i);
      }
      if (starts.empty()) break;
      const std::size_t at = starts[pick(starts.size())];
      std::size_t end = at;
      while (end < b.size() && std::isdigit(b[end])) ++end;
      const std::string huge = kHugeDecimals[pick(std::size(kHugeDecimals))];
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(end));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), huge.begin(), huge.end());
      break;
    }
    default: {  // a binary integer made huge: 1, 2, 4 or 8 bytes of 0xff, 0x7f ff.. or 0x80 00..
      if (b.empty()) break;
      const std::size_t width = std::size_t{1} << (rng() % 4), at = pick(b.size());
      const int style = static_cast<int>(rng() % 3);
      for (std::size_t i = 0; i < width && at + i < b.size(); ++i) {
        const bool top = i + 1 == width;  // little-endian: the last byte is the most significant
        b[at + i] = style == 0 ? 0xff : style == 1 ? (top ? 0x7f : 0xff) : (top ? 0x80 : 0x00);
      }
      break;
    }
  }
}

// Runs one input; on an escaping exception, says which, saves the input and exits 1.
void run_one(const Bytes& input, const std::string& origin, int& failures) {
  std::snprintf(g_current, sizeof g_current, "%s", origin.c_str());
  try {
    LLVMFuzzerTestOneInput(input.data(), input.size());
  } catch (const std::exception& e) {
    int status = 0;
    char* type = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    const std::string saved = "fuzz-failure-" + std::to_string(++failures) + ".bin";
    std::ofstream(saved, std::ios::binary).write(reinterpret_cast<const char*>(input.data()),
                                                 static_cast<std::streamsize>(input.size()));
    std::fprintf(stderr, "replay: %s: %s escaped: %s (input saved as %s)\n", origin.c_str(),
                 status == 0 ? type : typeid(e).name(), e.what(), saved.c_str());
    std::free(type);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> paths;
  long mutations = 2000;
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) {
      mutations = std::atol(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      paths.emplace_back(a);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [--mutations N] [--seed S] | FILE...\n", argv[0]);
    return 2;
  }
#ifndef REDWOOD_SANITIZED  // ASan reserves terabytes of shadow address space and reports crashes itself
  const rlimit cap{kAddressSpace, kAddressSpace};
  ::setrlimit(RLIMIT_AS, &cap);
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS}) std::signal(sig, on_signal);
#endif
  LLVMFuzzerInitialize(&argc, &argv);

  const bool corpus = paths.size() == 1 && fs::is_directory(paths[0]);
  std::vector<fs::path> files;
  if (corpus) {
    for (const auto& entry : fs::directory_iterator(paths[0])) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files = paths;
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input in %s\n", paths[0].c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<Bytes> seeds;
  int failures = 0;
  for (const auto& f : files) {
    seeds.push_back(read_file(f));
    run_one(seeds.back(), f.string(), failures);
  }
  long ran = 0;
  if (corpus) {
    std::mt19937_64 rng(seed);
    for (; ran < mutations; ++ran) {
      const std::size_t which = static_cast<std::size_t>(ran) % seeds.size();
      Bytes b = seeds[which];
      std::string origin = files[which].filename().string() + " mutant " + std::to_string(ran) + " (seed " +
                           std::to_string(seed) + ")";
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) mutate_once(b, rng);
      run_one(b, origin, failures);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("replay: %zu inputs and %ld mutants in %.2f s, %d failures\n", files.size(), ran, seconds, failures);
  return failures == 0 ? 0 : 1;
}
