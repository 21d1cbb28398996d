#include "core/npy.hpp"

#include "core/error.hpp"

#include <charconv>
#include <cctype>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace redwood {

namespace {
const char kMagic[] = "\x93NUMPY";

std::string npy_descr(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    default: break;
  }
  throw Unsupported(fmt::format(".npy has no type for {}", dtype_name(t)));
}

DType dtype_from_descr(const std::string& d, const std::string& file) {
  if (d == "<f4") return DType::kF32;
  if (d == "<f2") return DType::kF16;
  if (d == "<i8") return DType::kI64;
  if (d == "<i4") return DType::kI32;
  if (d == "|u1") return DType::kU8;
  if (d == "|b1") return DType::kBool;
  throw InvalidArgument(fmt::format("{}: .npy dtype '{}' is not supported (float32, float16, int64, "
                                    "int32, uint8, bool)", file, d));
}

// The text after "'key'" and its colon (spaces around it skipped) in a .npy header dict, or
// nullopt when the key is not there. A hand scan, not std::regex: libstdc++'s regex matcher
// recurses once per character and overflows the stack on a long header (one of 100 kB crashed).
std::optional<std::string_view> header_value(std::string_view header, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "'";
  for (std::size_t at = header.find(quoted); at != std::string_view::npos; at = header.find(quoted, at + 1)) {
    std::size_t i = at + quoted.size();
    while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
    if (i >= header.size() || header[i] != ':') continue;
    ++i;
    while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
    return header.substr(i);
  }
  return std::nullopt;
}

// The text between `open` and the first `close` at the start of `value` ("'<f4'", "(2, 3)").
std::optional<std::string_view> delimited(std::optional<std::string_view> value, char open, char close) {
  if (!value || value->empty() || value->front() != open) return std::nullopt;
  const std::size_t end = value->find(close, 1);
  if (end == std::string_view::npos) return std::nullopt;
  return value->substr(1, end - 1);
}

Tensor read_npy_stream(std::istream& in, const std::string& name) {
  char magic[6];
  in.read(magic, 6);
  RW_EXPECTS(in.good() && std::memcmp(magic, kMagic, 6) == 0, InvalidArgument,
             "{}: not a .npy file (bad magic)", name);
  unsigned char version[2];
  in.read(reinterpret_cast<char*>(version), 2);
  RW_EXPECTS(in.good(), InvalidArgument, "{}: truncated .npy header", name);
  std::uint32_t header_len = 0;
  if (version[0] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (version[0] == 2 || version[0] == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (std::uint32_t(b[3]) << 24);
  } else {
    throw InvalidArgument(fmt::format("{}: .npy format version {} is not supported", name, int(version[0])));
  }
  RW_EXPECTS(in.good() && header_len < (1u << 20), InvalidArgument, "{}: truncated .npy header", name);
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  RW_EXPECTS(in.good(), InvalidArgument, "{}: truncated .npy header", name);

  const auto descr = delimited(header_value(header, "descr"), '\'', '\'');
  RW_EXPECTS(descr && !descr->empty(), InvalidArgument, "{}: .npy header has no descr", name);
  const DType dtype = dtype_from_descr(std::string(*descr), name);
  const auto fortran = header_value(header, "fortran_order");
  const bool is_false = fortran && fortran->substr(0, 5) == "False";
  RW_EXPECTS(is_false || (fortran && fortran->substr(0, 4) == "True"), InvalidArgument,
             "{}: .npy header has no fortran_order", name);
  RW_EXPECTS(is_false, Unsupported, "{}: Fortran-ordered .npy files are not supported", name);
  const auto shape_text = delimited(header_value(header, "shape"), '(', ')');
  RW_EXPECTS(shape_text.has_value(), InvalidArgument, "{}: .npy header has no shape", name);
  // The shape: comma-separated non-negative integers ("(2, 3)", "(4,)", "()").
  Shape shape;
  const std::string dims(*shape_text);
  std::size_t at = 0;
  while (at < dims.size()) {
    std::size_t end = dims.find(',', at);
    if (end == std::string::npos) end = dims.size();
    std::string item = dims.substr(at, end - at);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    at = end + 1;
    if (item.empty() && end == dims.size()) break;  // the trailing comma of "(4,)"
    std::int64_t d = -1;
    const auto [rest, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    RW_EXPECTS(ec == std::errc() && rest == item.data() + item.size() && d >= 0, InvalidArgument,
               "{}: .npy shape ({}) has '{}' where a dimension (an integer >= 0) belongs", name, dims, item);
    shape.push_back(d);
  }
  // Sizes from the header are checked before anything is allocated: a shape whose element count
  // overflows, or that the file does not hold, is an error naming the file.
  std::int64_t numel = 0;
  try {
    numel = shape_numel(shape);
    (void)contiguous_strides(shape);  // an empty shape's other extents may still multiply past 2^56
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: .npy {}", name, e.what()));
  }
  const std::size_t need = static_cast<std::size_t>(numel) * dtype_size(dtype);
  const auto data_at = in.tellg();
  in.seekg(0, std::ios::end);
  const auto file_end = in.tellg();
  in.seekg(data_at);
  RW_EXPECTS(data_at >= 0 && file_end >= data_at, IoError, "{}: cannot tell the .npy file's size", name);
  const auto holds = static_cast<std::size_t>(file_end - data_at);
  RW_EXPECTS(holds >= need, InvalidArgument, "{}: truncated .npy data ({} of {} bytes for {}[{}])", name, holds, need,
             dtype_name(dtype), dims);
  Tensor t = Tensor::empty(dtype, shape);
  in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  RW_EXPECTS(static_cast<std::size_t>(in.gcount()) == t.nbytes(), InvalidArgument,
             "{}: truncated .npy data ({} of {} bytes for {})", name, in.gcount(), t.nbytes(),
             t.description());
  return t;
}

}  // namespace

Tensor read_npy(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  RW_EXPECTS(in.good(), IoError, "{}: cannot open", file.string());
  return read_npy_stream(in, file.string());
}

Tensor read_npy_bytes(const std::string& bytes, const std::string& source) {
  std::istringstream in(bytes, std::ios::binary);
  return read_npy_stream(in, source);
}

void write_npy(const std::filesystem::path& file, const Tensor& tensor) {
  Tensor t = tensor.contiguous();
  std::string dims;  // "(2, 3)", "(5,)", "()"
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(t.shape()[i]);
  }
  if (t.rank() == 1) dims += ",";
  std::string header = "{'descr': '" + npy_descr(t.dtype()) +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t total = 6 + 2 + 2 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const auto tmp = std::filesystem::path(file.string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RW_EXPECTS(out.good(), IoError, "{}: cannot write", file.string());
    out.write(kMagic, 6);
    const char version[2] = {1, 0};
    out.write(version, 2);
    const std::uint16_t len = static_cast<std::uint16_t>(header.size());
    const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(len_bytes, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
    out.flush();
    if (!out.good()) {
      out.close();
      std::filesystem::remove(tmp);
      throw IoError(fmt::format("{}: write failed", file.string()));
    }
  }
  std::filesystem::rename(tmp, file);
}

}  // namespace redwood
