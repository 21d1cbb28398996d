#pragma once
// The schedule every executable of a model is built from, in two layers:
//
//   Dataflow (any input shapes)           Schedule (one set of input shapes)
//   values and steps by integer id,       + each value's dtype and shape, host-known values
//   what each step reads and writes,        evaluated (shape arithmetic, constants), each device
//   last readers, graph inputs/outputs,     step's kernel and scratch, lifetimes, Concat inputs
//   the shape chains (per-shape folding)    written in place, one workspace (memory/)
//
// The CPU executable (runtime/executor.hpp) runs on the Dataflow: its kernels size their outputs
// as they run, so it records a memory plan on the first run of each input-shape signature. The
// CUDA executable (backends/cuda/graph_runner.hpp) plans ahead: its kernels say their outputs'
// shapes at plan time (a StepPlanner), so build_schedule places everything before anything runs,
// and the plan is captured into a CUDA graph. Both check their inputs with check_inputs /
// check_input_shapes, and both place their workspaces with the liveness planner.
//
// Host only: nothing here touches a device, so schedules are tested where there is no GPU.

#include "core/graph/graph.hpp"
#include "core/kernel_info.hpp"
#include "core/op_registry.hpp"
#include "core/tensor.hpp"
#include "memory/liveness_planner.hpp"

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace redwood::runtime {

/// A graph's values and steps (its nodes, in order) by integer id. Built once per graph.
struct Dataflow {
  std::map<std::string, int> ids;                  // value name -> id
  std::vector<std::string> names;                  // id -> value name
  std::vector<const Tensor*> initializers;         // id -> the graph's initializer, or null
  std::vector<std::vector<int>> node_inputs;       // per node: ids, -1 for an absent input
  std::vector<std::vector<int>> node_outputs;      // per node: ids, -1 for an unused output
  std::vector<int> graph_inputs, graph_outputs;    // ids, in the graph's order
  std::vector<int> last_use;                       // id -> the last node that reads it, -1 for none
  std::vector<bool> is_graph_output;               // id -> returned to the caller
  std::size_t size() const { return names.size(); }
};

/// The dataflow of `graph`. Throws InvalidArgument naming the node whose input, or the graph
/// output, that no graph input, initializer or earlier node provides.
Dataflow make_dataflow(const Graph& graph);

/// The nodes whose outputs depend only on the input shapes, not on their values: Shape, and
/// every node fed only by constants and such nodes' outputs with at least one of the latter (the
/// Shape/Gather/Concat chains exporters leave to build Reshape targets). A node of constants
/// alone is the optimizer's to fold; a graph output is returned as it is. Per node.
std::vector<bool> shape_determined_nodes(const Graph& graph, const Dataflow& flow);

/// The input validator both executables use: every graph input given (by name, no unknown
/// name), on `device`, with the declared dtype, rank and fixed extents, and symbolic dimensions
/// bound alike across inputs. Throws InvalidArgument naming the model, the input and what differs.
void check_inputs(const Graph& graph, const std::map<std::string, Tensor>& inputs, Device device);
/// The same for inputs given in the graph's input order, one each. Neither allocates unless it
/// throws: they run on every batch.
void check_inputs(const Graph& graph, std::span<const Tensor> inputs, Device device);
/// The same for input shapes alone, in the graph's input order (a planner's view: no values yet).
void check_input_shapes(const Graph& graph, const std::vector<Shape>& shapes);

/// What a device planner's kernel says about a node at plan time: the kernel, its provider, its
/// outputs' dtypes and shapes, and the scratch its launch needs.
struct StepPlan {
  std::unique_ptr<Kernel> kernel;
  std::string provider;
  std::vector<TensorDesc> outputs;
  std::size_t workspace_bytes = 0;
};
/// Chooses and plans the kernel of one node whose inputs are these (dtype, shape, and the value
/// where known on the host). Throws Unsupported naming the node when the device has none.
using StepPlanner = std::function<StepPlan(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs)>;

/// Where each node of a graph runs and where each device value lives, for one set of input
/// shapes. Value ids are the Dataflow's, then one per step's scratch.
struct Schedule {
  enum class Kind { kHost, kGraphInput, kDevice };
  struct Value {
    std::string name;
    Kind kind = Kind::kDevice;
    DType dtype = DType::kUndefined;
    Shape shape;
    Tensor host;              // the value, for kHost
    bool initializer = false; // kHost values that are graph initializers (shared by plans)
    bool uploaded = false;    // kHost values a device step reads (copied to the device)
    std::int64_t first_step = 0, last_step = 0;
    std::size_t offset = 0;   // in the workspace, for kGraphInput and kDevice
    // A Concat input written in place: the id of the Concat's output, which holds this value's
    // bytes at alias_offset (its producer writes there, the Concat copies nothing for it); -1
    // for a value with its own place.
    int alias_of = -1;
    std::size_t alias_offset = 0;
    std::size_t bytes() const { return static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype); }
  };
  struct Step {
    std::size_t node = 0;  // index into the graph's nodes
    std::string provider;
    std::unique_ptr<Kernel> kernel;    // the StepPlanner's (a CUDA schedule's: a CudaKernel)
    std::vector<int> inputs, outputs;  // value ids, -1 for absent
    int workspace = -1;                // value id of the kernel's scratch, if it needs some
  };
  std::vector<Value> values;
  std::vector<Step> steps;
  std::vector<int> graph_inputs, graph_outputs;  // value ids, in the graph's order
  std::size_t host_nodes = 0;                    // nodes evaluated on the host at plan time
  memory::WorkspacePlan workspace;
};

/// The schedule of `graph` at these input shapes (the graph's input order): every node whose
/// inputs are all known on the host (initializers, Shape of a planned value, and what is computed
/// from those) is evaluated once here with the reference kernels; every other node is a step,
/// planned by `plan_step`. Graph inputs, intermediates, outputs and scratch get offsets in one
/// workspace, aligned to `alignment`. Throws what `plan_step` throws, InvalidArgument for bad
/// shapes.
Schedule build_schedule(const Graph& graph, const std::vector<Shape>& input_shapes, const StepPlanner& plan_step,
                        std::size_t alignment = 256);

}  // namespace redwood::runtime
