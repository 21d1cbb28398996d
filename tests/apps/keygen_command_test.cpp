// `redwood keygen DIR/NAME` as a user runs it: a key pair the zmq sink and ZeroMQ accept, the
// secret readable by its owner only, and never a key overwritten.

#include "stages/sink/curve_keys.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace redwood {
namespace {

std::string contents(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(KeygenCommand, WritesAMatchingPairWithAPrivateSecret) {
  const auto dir = testing::temp_dir("keygen");
  const auto r = testing::run_launcher("keygen " + (dir / "keys" / "server").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto public_file = dir / "keys" / "server.key", secret_file = dir / "keys" / "server.key_secret";
  EXPECT_NE(r.output.find(public_file.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(secret_file.string()), std::string::npos) << r.output;
  using std::filesystem::perms;
  EXPECT_EQ(std::filesystem::status(secret_file).permissions() & perms::all, perms::owner_read | perms::owner_write);
  const CurveCertificate secret = read_curve_certificate(secret_file, true);  // throws unless the keys match
  const CurveCertificate shared = read_curve_certificate(public_file, false);
  EXPECT_EQ(shared.public_key, secret.public_key);
  EXPECT_FALSE(shared.secret_key.has_value()) << contents(public_file);
  EXPECT_EQ(contents(public_file).find(secret.secret_key->z85), std::string::npos) << "the public file holds no secret";

  // A second pair is another pair.
  ASSERT_EQ(testing::run_launcher("keygen " + (dir / "keys" / "other").string()).exit_code, 0);
  EXPECT_NE(read_curve_certificate(dir / "keys" / "other.key", false).public_key, shared.public_key);
}

TEST(KeygenCommand, RefusesToOverwrite) {
  const auto dir = testing::temp_dir("keygen");
  ASSERT_EQ(testing::run_launcher("keygen " + (dir / "a").string()).exit_code, 0);
  const std::string secret_before = contents(dir / "a.key_secret");
  std::filesystem::remove(dir / "a.key");  // one file of the pair left is still a key
  const auto r = testing::run_launcher("keygen " + (dir / "a").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'" + (dir / "a.key_secret").string() + "' exists; keygen never overwrites a key"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(contents(dir / "a.key_secret"), secret_before);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.key")) << "nothing written when refusing";
}

}  // namespace
}  // namespace redwood
