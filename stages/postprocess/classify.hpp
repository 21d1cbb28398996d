#pragma once
// Reading a classifier's output: a row of scores per item (a crop, or the whole picture), turned
// into probabilities where they are logits, and the best classes of each row.

#include <span>
#include <utility>
#include <vector>

namespace redwood {

/// exp(x - max) / sum, in place (numerically stable). An empty row stays empty.
void softmax_in_place(std::span<float> row);

/// True when the row already reads as probabilities: every value in [0, 1], summing to 1 within
/// `tolerance`.
bool looks_like_probabilities(std::span<const float> row, float tolerance = 1e-3f);

/// The `k` best (class id, score) of a row, best first (the lower id of equal scores), those
/// below `min_score` left out.
std::vector<std::pair<int, float>> top_classes(std::span<const float> row, int k, float min_score);

}  // namespace redwood
