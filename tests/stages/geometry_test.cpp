// Redwood's points and rectangles (stages/geometry.hpp) against OpenCV's: the corner constructor
// and the intersection give OpenCV's results bit for bit, so boxes are what cv::Rect2f made.

#include "stages/geometry.hpp"
#include "stages/picture_cv.hpp"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <stdexcept>
#include <vector>

namespace redwood {
namespace {

void expect_same(const RectF& mine, const cv::Rect2f& theirs) {
  EXPECT_EQ(mine.x, theirs.x);
  EXPECT_EQ(mine.y, theirs.y);
  EXPECT_EQ(mine.width, theirs.width);
  EXPECT_EQ(mine.height, theirs.height);
}

TEST(Geometry, SpanningAndIntersectionAreOpenCvs) {
  std::vector<RectF> rects{{0, 0, 10, 10},    {5, 5, 10, 10},  {10, 0, 5, 5},       {-3, -2, 4, 4}, {-5, 0, 2, 2},
                           {1, 1, 0, 5},      {1, 1, -2, 5},   {0.1f, 0.2f, 0.3f, 0.4f}, {0, 0, 1e-7f, 1e-7f},
                           {12.5f, 3.25f, 7.75f, 100.f}};
  std::mt19937 random(7);
  std::uniform_real_distribution<float> at(-50.f, 150.f), extent(-5.f, 80.f);
  for (int i = 0; i < 300; ++i) rects.push_back({at(random), at(random), extent(random), extent(random)});
  for (const RectF& a : rects) {
    for (const RectF& b : rects) {
      SCOPED_TRACE(::testing::Message() << "a " << a.x << "," << a.y << " " << a.width << "x" << a.height << "; b " << b.x
                                      << "," << b.y << " " << b.width << "x" << b.height);
      expect_same(intersection(a, b), to_cv(a) & to_cv(b));
      expect_same(RectF::spanning(a.top_left(), b.bottom_right()), cv::Rect2f(to_cv(a.top_left()), to_cv(b.bottom_right())));
      EXPECT_EQ(a.area(), to_cv(a).area());
      EXPECT_EQ(a.empty(), to_cv(a).empty());
    }
  }
}

TEST(Geometry, ConvertsToAndFromOpenCv) {
  const RectF r{1.5f, -2.f, 3.25f, 4.f};
  EXPECT_EQ(from_cv(to_cv(r)), r);
  EXPECT_EQ(to_cv(r).br(), to_cv(r.bottom_right()));
  const PointF p{7.5f, 8.25f};
  EXPECT_EQ(from_cv(to_cv(p)), p);
}

TEST(Quad, HoldsUpToFourCornersInPlaceAndReadsAsASpan) {
  Quad q;
  EXPECT_TRUE(q.empty());
  q = {{1, 2}, {3, 2}, {3, 4}, {1, 4}};
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[2], (PointF{3, 4}));
  const std::span<const PointF> corners = q;
  EXPECT_EQ(corners.size(), 4u);
  EXPECT_EQ(corners.data(), &q[0]) << "a view of the quad's own points";
  EXPECT_THROW(q.push_back({5, 5}), std::length_error);
  EXPECT_EQ(q.size(), 4u) << "a refused corner changes nothing";
  EXPECT_THROW((Quad{{0, 0}, {1, 0}, {1, 1}, {0, 1}, {2, 2}}), std::length_error);
  Quad same{{1, 2}, {3, 2}, {3, 4}, {1, 4}};
  EXPECT_EQ(q, same);
  same[3] = {1, 5};
  EXPECT_NE(q, same);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_NE(q, same) << "sizes differ";
}

}  // namespace
}  // namespace redwood
