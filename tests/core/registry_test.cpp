// Registry<Factory> (core/registry.hpp): one factory per name, a second registration of a name
// refused with the kind and the name, unknown names answered with the names there are; and the
// registries the loaders read hold what the build registered, refusing a duplicate.

#include "core/registry.hpp"

#include "core/model_runner.hpp"
#include "stages/sink/sink.hpp"
#include "stages/source/source.hpp"
#include "stages/stage.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace redwood {
namespace {

using Maker = std::function<int()>;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<nothing thrown>";
}

TEST(Registry, OneFactoryPerNameAndASecondRegistrationIsRefused) {
  Registry<Maker> r("widget");
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.add("b", [] { return 2; }));
  EXPECT_TRUE(r.add("a", [] { return 1; }));
  EXPECT_EQ(message_of([&] { r.add("a", [] { return 3; }); }),
            "widget 'a' is registered twice (two definitions of one name are linked)");
  EXPECT_EQ(r.at("a")(), 1) << "the first registration stays";
  EXPECT_EQ(message_of([&] { r.add("", [] { return 0; }); }), "a widget is registered without a name");
  EXPECT_EQ(r.size(), 2u);
  EXPECT_TRUE(r.contains("b"));
  EXPECT_EQ(r.count("c"), 0u);
  EXPECT_EQ(r.find("c"), r.end());
  std::string order;
  for (const auto& [name, make] : r) order += name;
  EXPECT_EQ(order, "ab") << "names in order, for the loaders' lists of known names";
}

TEST(Registry, AnUnknownNameIsAnsweredWithTheKnownOnes) {
  Registry<Maker> r("widget");
  EXPECT_EQ(message_of([&] { r.at("x"); }), "no widget named 'x' (known: none)");
  r.add("b", [] { return 2; });
  r.add("a", [] { return 1; });
  EXPECT_EQ(message_of([&] { r.at("x"); }), "no widget named 'x' (known: a, b)");
  EXPECT_THROW(r.at("x"), Unsupported);
}

TEST(Registry, TheLoadersRegistriesRefuseADuplicateOfWhatTheBuildRegistered) {
  ASSERT_TRUE(stage_registry().contains("infer"));
  ASSERT_TRUE(source_registry().contains("video"));
  ASSERT_TRUE(sink_registry().contains("video")) << "a sink and a source may share a name: two registries";
  EXPECT_EQ(message_of([] { register_stage("infer", nullptr); }),
            "stage type 'infer' is registered twice (two definitions of one name are linked)");
  EXPECT_EQ(message_of([] { register_source("video", nullptr); }),
            "source type 'video' is registered twice (two definitions of one name are linked)");
  EXPECT_EQ(message_of([] { register_sink("zmq", nullptr); }),
            "sink type 'zmq' is registered twice (two definitions of one name are linked)");
  EXPECT_NE(stage_registry().at("infer"), nullptr) << "the build's factory stays";
  EXPECT_EQ(device_runner_registry().kind(), "device runner");
}

}  // namespace
}  // namespace redwood
