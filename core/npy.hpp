#pragma once
// NumPy .npy files (format 1.0/2.0, little-endian, C order): the exchange format of `redwood
// infer --input/--save` and of the tests that compare Redwood with ONNX Runtime.

#include "core/tensor.hpp"

#include <filesystem>
#include <string>

namespace redwood {

/// Reads a .npy file of a dtype Redwood holds (f4, f2, i8, i4, u1, b1; '<' or '|' byte order).
/// Throws IoError for a missing file, InvalidArgument for a malformed or unsupported one.
Tensor read_npy(const std::filesystem::path& file);
/// The same from a file's bytes in memory; `source` names it in messages.
Tensor read_npy_bytes(const std::string& bytes, const std::string& source);

/// Writes a tensor as .npy (format 1.0). Writes to a temporary file beside it and renames, so a
/// failure never leaves a half-written file.
void write_npy(const std::filesystem::path& file, const Tensor& tensor);

}  // namespace redwood
