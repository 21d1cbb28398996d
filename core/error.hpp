#pragma once
// Errors carry context: what went wrong, where (file, node, input), and why. Set-up paths throw;
// the hot path returns values. Every Redwood error derives from redwood::Error so that `main`
// can print one message and exit non-zero.

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace redwood {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The model or an input is malformed: corrupt file, bad attribute, wrong shape or dtype.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// Something Redwood does not implement: an op, an attribute value, a dtype.
class Unsupported : public Error {
 public:
  using Error::Error;
};

/// A file or asset that should be there is missing or unreadable.
class IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace redwood

/// RW_EXPECTS(cond, ErrorType, "fmt", args...): throws ErrorType with the formatted message
/// when cond is false.
#define RW_EXPECTS(cond, ErrorType, ...)                 \
  do {                                                   \
    if (!(cond)) throw ErrorType(fmt::format(__VA_ARGS__)); \
  } while (0)
