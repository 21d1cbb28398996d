#pragma once
// CURVE key files, read by the zmq sink's `curve` option and written by `redwood keygen`. The
// format is ZeroMQ's certificate text ("zcert": what czmq's zcert_save and pyzmq's
// zmq.auth.create_certificates write, and zmq.auth.load_certificate reads): a key pair is two
// files, NAME.key (the public certificate, safe to hand out) and NAME.key_secret (both keys;
// mode 0600), each key 40 Z85 characters (32 bytes):
//
//   #   ZeroMQ CURVE Secret Certificate
//   metadata
//   curve
//       public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
//       secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
//
// Lines starting with '#' are comments; a key's value may be quoted ("..." or '...') or bare.
// Every mistake is an InvalidArgument that names the file, and the line and column of the key
// when there is one: "server.key_secret:7:19: secret-key is 39 characters; a Z85 CURVE key has 40".

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redwood {

/// A CURVE key: 32 bytes, and the same as 40 Z85 characters.
struct CurveKey {
  std::array<std::uint8_t, 32> bytes{};
  std::string z85;

  static CurveKey from_bytes(const std::uint8_t* data);
  bool operator<(const CurveKey& other) const { return bytes < other.bytes; }
  bool operator==(const CurveKey& other) const { return bytes == other.bytes; }
};

/// What one certificate file holds.
struct CurveCertificate {
  std::filesystem::path file;
  CurveKey public_key;
  std::optional<CurveKey> secret_key;  // in NAME.key_secret only
};

/// Reads a certificate. With `need_secret`, it must hold a secret-key, and that key must be the
/// one its public-key belongs to.
CurveCertificate read_curve_certificate(const std::filesystem::path& file, bool need_secret);

/// The certificates at `path`: that file, or every *.key file of that folder (at least one; a
/// folder's *.key_secret files are not read).
std::vector<CurveCertificate> read_curve_certificates(const std::filesystem::path& path);

/// Makes a key pair (zmq_curve_keypair) and writes `base`.key and `base`.key_secret (mode 0600),
/// creating missing folders. Refuses, with IoError, when either file exists: a key is never
/// overwritten. Returns the two paths, public first.
std::pair<std::filesystem::path, std::filesystem::path> write_curve_key_pair(const std::filesystem::path& base);

}  // namespace redwood
