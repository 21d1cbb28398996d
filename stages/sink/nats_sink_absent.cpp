// Built instead of nats_sink.cpp when CMake found no libnats (cmake/RedwoodDependencies.cmake):
// `type: nats` then fails at load with what to install, not as an unknown sink type.

#include "stages/sink/sink.hpp"

namespace redwood {
namespace {

class NatsSinkAbsent final : public Sink {
 public:
  explicit NatsSinkAbsent(SinkArgs& a) { a.params.fail("type", "this build has no NATS client (install libnats-dev)"); }
  void write(const Frame&, double) override {}
};

}  // namespace

RW_REGISTER_SINK("nats", NatsSinkAbsent);

}  // namespace redwood
