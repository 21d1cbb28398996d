#pragma once
// Liveness planner: packs a subgraph's intermediate tensors into one workspace, so that a model
// runs with a single allocation (greedy by size over lifetime overlaps; see the picture in
// core/liveness_plan.hpp). The algorithm is pure (no memory is touched) and lives in core, where
// the executor plans its workspaces with it (core cannot depend on redwood::memory, which is
// built on core); this header is memory's name for it.

#include "core/liveness_plan.hpp"

namespace redwood::memory {

using redwood::plan_workspace;
using redwood::TensorLifetime;
using redwood::workspace_lower_bound;
using redwood::WorkspacePlan;

}  // namespace redwood::memory
