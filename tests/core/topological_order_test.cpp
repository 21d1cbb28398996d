// The stable topological order the IR and the ONNX importer share: a valid order comes back as
// it is, an invalid one changes only where it must, and a cycle is named by its nodes.

#include "core/error.hpp"
#include "core/graph/topological_order.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

TEST(TopologicalOrder, KeepsAValidOrderAndMovesOnlyWhatMust) {
  EXPECT_EQ(topological_order({{}, {0}, {0, 1}, {}}).order, (std::vector<std::size_t>{0, 1, 2, 3}));
  // 0 reads 2, 2 reads 1: 1 and 3 are ready at once and keep their order; 2 follows 1, then 0.
  EXPECT_EQ(topological_order({{2}, {}, {1}, {}}).order, (std::vector<std::size_t>{1, 2, 0, 3}));
}

TEST(TopologicalOrder, NamesTheNodesOfACycle) {
  // 3 reads 1, 1 reads 2, 2 reads 3; 0 reads 1 (behind the cycle, not on it).
  const TopologicalOrder sorted = topological_order({{1}, {2}, {3}, {1}});
  EXPECT_TRUE(sorted.order.empty());
  EXPECT_EQ(sorted.cycle, (std::vector<std::size_t>{1, 3, 2}));  // 3 reads 1, 2 reads 3, 1 reads 2
  EXPECT_EQ(topological_order({{0}}).cycle, (std::vector<std::size_t>{0}));
}

TEST(TopologicalOrder, TheIrsSortNamesTheNodesOfACycle) {
  auto graph = testing::make_x_to_y_graph("cycle");
  graph->source = "hand.onnx";
  graph->nodes = {testing::make_node("out", "Relu", {"a"}, {"y"}), testing::make_node("add", "Add", {"x", "n"}, {"a"}),
                  testing::make_node("relu", "Relu", {"a"}, {"r"}), testing::make_node("neg", "Neg", {"r"}, {"n"})};
  EXPECT_THROWS_SAYING(graph->sort_topologically(), InvalidArgument,
                       "hand.onnx: the nodes form a cycle: node 'add' (Add) -> node 'relu' (Relu) -> node 'neg' (Neg) "
                       "-> node 'add' (Add)");
}

}  // namespace
}  // namespace redwood
