// CTC greedy decoding: repeats merge, blanks separate, the last class is a space.

#include "stages/postprocess/ctc_decode.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace redwood {
namespace {

std::vector<float> one_hot(const std::vector<int>& best, std::size_t classes) {
  std::vector<float> p(best.size() * classes, 0.01f);
  for (std::size_t t = 0; t < best.size(); ++t) p[t * classes + best[t]] = 0.9f;
  return p;
}

TEST(CtcDecode, MergesRepeatsDropsBlanksAndMapsSpace) {
  const CtcDictionary dict(std::vector<std::string>{"A", "B", "C"});  // classes: blank, A, B, C, space
  ASSERT_EQ(dict.classes(), 5u);
  const auto p = one_hot({1, 1, 0, 1, 2, 2, 4, 3, 0, 0}, 5);
  const CtcResult r = dict.decode(p.data(), 10, 5);
  EXPECT_EQ(r.text, "AAB C");
  EXPECT_NEAR(r.score, 0.9f, 1e-6);
}

TEST(CtcDecode, AllBlankIsEmpty) {
  const CtcDictionary dict(std::vector<std::string>{"A"});
  const auto p = one_hot({0, 0, 0}, 3);
  EXPECT_EQ(dict.decode(p.data(), 3, 3).text, "");
  EXPECT_EQ(dict.decode(p.data(), 3, 3).score, 0.f);
}

// Over many classes (the vectorized search's full width and its tail) the first of equal maxima
// wins, wherever the maxima sit.
TEST(CtcDecode, TheFirstOfEqualMaximaWinsOverManyClasses) {
  std::vector<std::string> chars;
  for (int i = 0; i < 1000; ++i) chars.push_back(fmt::format("<{}>", i + 1));
  const CtcDictionary dict(chars);
  const std::size_t classes = dict.classes();  // 1002: not a multiple of any vector width
  for (const auto& [first, second] : std::vector<std::pair<std::size_t, std::size_t>>{{7, 900}, {999, 1000}, {1000, 1001}, {3, 4}}) {
    std::vector<float> p(classes, 0.001f);
    p[first] = p[second] = 0.5f;
    EXPECT_EQ(dict.decode(p.data(), 1, classes).text, first == 1001 ? " " : fmt::format("<{}>", first)) << first;
  }
}

TEST(CtcDecode, PpOcrDictionaryMatchesTheRecognizer) {
  const CtcDictionary dict(testing::assets_dir() / "models" / "ppocr_keys_v1.txt");
  EXPECT_EQ(dict.classes(), 6625u);  // softmax_11.tmp_0's last dimension
  EXPECT_THROW(CtcDictionary(std::filesystem::path("/no/such/keys.txt")), IoError);
}

}  // namespace
}  // namespace redwood
