#pragma once
// The ONNX importer's work on the file's own protobuf, before Redwood's IR is built
// (core/onnx/onnx_import.cpp runs these in this order):
//
//   parse ─► check_opsets ─► sort_graph ─► check_model ─► inline_constant_ifs ─► shape inference ─► IR
//
// sort_graph and check_model make the import as lenient as ONNX Runtime where ONNX's checker is
// stricter than the runtime (nodes out of topological order, graphs without a name, graph inputs
// without a shape): such a model loads with a warning naming what the checker would refuse.
// Everything else the checker refuses stays an error.

#include "core/tensor.hpp"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>

namespace redwood::onnx_detail {

/// "node 'conv_1' (Conv)", or for a node without a name "the Conv node writing 'y'".
std::string node_label(const onnx::NodeProto& node);

/// Throws Unsupported when the model imports a default-domain opset newer than the ONNX library
/// Redwood is built with knows, naming both.
void check_opsets(const onnx::ModelProto& model, const std::string& source);

/// Orders the nodes of `graph`, and of the graphs nested in its nodes (If branches, Loop bodies),
/// so that each comes after the producers of its inputs, including the values its nested graphs
/// read from this one; the file's order is kept where it is valid, and a change is logged at warn.
/// Throws InvalidArgument naming the nodes on a cycle, two nodes that write one value, a node
/// that writes a graph input or an initializer, and (in the outermost graph, where nothing
/// encloses it) an input that nothing provides. `where` names the graph in messages.
void sort_graph(onnx::GraphProto& graph, const std::string& where, bool outermost);

/// ONNX's checker over the model with its folder (where external data is looked for), lenient
/// where ONNX Runtime is (see above); throws InvalidArgument with the checker's verdict.
void check_model(onnx::ModelProto& model, const std::string& source, const std::filesystem::path& model_dir);

/// Replaces each If node of the outermost graph whose condition is a constant (an initializer or
/// a Constant node's output) by the nodes of the branch it takes, their values and names renamed
/// into the graph and the branch's outputs written under the If's output names. Ifs in the
/// branches taken are inlined in turn. Throws Unsupported naming an If whose condition is
/// computed at run time.
void inline_constant_ifs(onnx::GraphProto& graph, const std::string& source, const std::filesystem::path& model_dir);

/// A tensor's value (initializer, attribute, TensorProto file); external data is read from
/// `model_dir`. `where` names the tensor's file in messages.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& where, const std::filesystem::path& model_dir);

/// A Constant node's value, from whichever attribute holds it.
Tensor constant_from_proto(const onnx::NodeProto& node, const std::string& where, const std::filesystem::path& model_dir);

}  // namespace redwood::onnx_detail
