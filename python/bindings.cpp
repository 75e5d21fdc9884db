// python/bindings.cpp: the `gossip._gossip` extension (pybind11). A thin layer: the C++ peer
// (PeerSession: transport, TLS, membership, events, run record), the topology report and the
// simulator, with C++ errors arriving as Python exceptions carrying the same message
// (InputError -> ValueError, RuntimeError -> RuntimeError). Parameters cross through the buffer
// protocol without copies: the peer mixes the caller's float32 buffer in place. No networking is
// done in Python; the GIL is released while a round waits on the network.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <unistd.h>

#include "gossip/checkpoint.hpp"
#include "gossip/choice.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/data.hpp"
#include "gossip/monitor.hpp"
#include "gossip/peer.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "gossip/peer_setup.hpp"

namespace py = pybind11;
using namespace gossip;

namespace {

/// A PeerSession and the Python buffer it mixes (kept alive while the peer holds it).
/// Where the Peers of this process that have joined and not finished or stopped listen, with
/// their ranks: a second Peer of a rank already running here is refused by name (it would only
/// find its port taken).
std::mutex g_running_mutex;
std::map<std::string, int> g_running;

struct Peer {
  std::unique_ptr<PeerSession> session;
  py::object buffer_owner;
  std::string listen;  // where it listens (HOST:PORT), or "rank R" when that is not known
  bool running = false;

  /// Takes this Peer's place among the process's running peers before it joins.
  void claim() {
    const std::lock_guard lock(g_running_mutex);
    if (const auto it = g_running.find(listen); it != g_running.end())
      throw InputError(cat("gossip.Peer: rank ", it->second, " already runs in this process (a "
                           "Peer of rank ", it->second, " has joined on ", listen, " and not "
                           "finished): one process is one peer; finish() or stop() that Peer "
                           "first, or give this one another rank"));
    g_running.emplace(listen, session->rank());
    running = true;
  }
  void release() {
    if (!running) return;
    const std::lock_guard lock(g_running_mutex);
    g_running.erase(listen);
    running = false;
  }
  ~Peer() { release(); }
};

std::unique_ptr<Peer> peer_from_arguments(const PeerArguments& arguments) {
  PeerSetup s = peer_setup(arguments);
  if (!s.group.empty())
    throw InputError(cat("--ranks ", arguments.ranks.value_or(""), ": a Python process is one "
                         "peer; several peers in one process are gossip peer's"));
  log_line(cat("gossip peer: ", s.origin, "; files in ",
               peer_dir(s.options.out_dir, s.options.rank)));
  auto p = std::make_unique<Peer>();
  p->listen = cat("rank ", s.options.rank);
  try {
    const auto addresses = peer_addresses(s.config, *s.topology, s.options.launch);
    if (s.options.rank >= 0 && s.options.rank < static_cast<int>(addresses.size()))
      p->listen = listen_address(addresses[s.options.rank], s.config.net.bind);
  } catch (const std::exception&) {  // an address the session will refuse itself, by name
  }
  p->session = std::make_unique<PeerSession>(std::move(s.config), std::move(*s.topology),
                                             std::move(s.options));
  return p;
}

/// The float32 buffer `obj` exposes, checked: writable, C-contiguous, float32, not empty.
std::span<float> float_buffer(const py::buffer& obj, const char* what) {
  py::buffer_info info = obj.request(true);
  if (info.format != py::format_descriptor<float>::format() || info.itemsize != 4)
    throw InputError(cat(what, ": the buffer must hold float32 values, not format '",
                         info.format, "' (", info.itemsize, " bytes an item); convert it with "
                         ".float() or .astype(numpy.float32)"));
  py::ssize_t expect = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expect)
      throw InputError(cat(what, ": the buffer is not contiguous (strides do not match its "
                           "shape); make a contiguous copy (.contiguous()) and mix that"));
    expect *= info.shape[d];
  }
  if (info.size == 0) throw InputError(cat(what, ": the buffer is empty"));
  return {static_cast<float*>(info.ptr), static_cast<std::size_t>(info.size)};
}

py::dict graph_dict(const LiveGraph& g, const std::vector<int>& dead) {
  py::dict d;
  d["connected"] = g.connected;
  d["components"] = g.components;
  d["alive"] = g.alive;
  d["dead"] = dead;
  return d;
}

/// The run config's values a training script needs.
py::dict config_dict(const RunConfig& c) {
  py::dict d;
  d["path"] = c.path;
  d["epochs"] = c.train.epochs;
  d["batch"] = c.train.batch;
  d["seed"] = c.train.seed;
  d["lr"] = c.optimizer.lr;
  d["momentum"] = c.optimizer.momentum;
  d["weight_decay"] = c.optimizer.weight_decay;
  d["schedule"] = lr_schedule_name(c.optimizer.schedule);
  d["warmup_epochs"] = c.optimizer.warmup_epochs;
  d["min_lr"] = c.optimizer.min_lr;
  d["step_epochs"] = c.optimizer.step_epochs;
  d["gamma"] = c.optimizer.gamma;
  d["threads"] = c.train.threads;
  d["evals_per_epoch"] = c.train.evals_per_epoch;
  d["algorithm"] = algorithm_name(c.gossip.algorithm);
  d["period"] = c.gossip.period;
  d["train_images"] = c.data.train_images;
  d["train_labels"] = c.data.train_labels;
  d["test_images"] = c.data.test_images;
  d["test_labels"] = c.data.test_labels;
  d["limit_train"] = c.data.limit_train;
  return d;
}


/// A Python list and dict with the add() of JsonArray and JsonObject, so that a report built
/// by a template over those (topology_report_object) comes out as Python objects.
struct PyList {
  py::list list;
  template <typename T>
  PyList& add(T&& v) {
    if constexpr (requires { v.list; }) list.append(std::forward<T>(v).list);
    else if constexpr (requires { v.dict; }) list.append(std::forward<T>(v).dict);
    else list.append(py::cast(std::forward<T>(v)));
    return *this;
  }
};
struct PyDict {
  py::dict dict;
  template <typename T>
  PyDict& add(std::string_view key, T&& v) {
    const py::str k(key.data(), key.size());
    if constexpr (std::is_same_v<std::decay_t<T>, std::nullopt_t>) dict[k] = py::none();
    else if constexpr (requires { v.list; }) dict[k] = std::forward<T>(v).list;
    else if constexpr (requires { v.dict; }) dict[k] = std::forward<T>(v).dict;
    else dict[k] = py::cast(std::forward<T>(v));
    return *this;
  }
};

/// gossip.Peer: one peer of a run, driven by the Python caller (PeerSession).
void bind_peer_rounds(py::class_<Peer>& peer);
void bind_peer_end(py::class_<Peer>& peer);

/// gossip.PeerArguments: gossip peer's options as typed fields (gossip/peer_setup.hpp).
void bind_arguments(py::module_& m) {
  py::class_<PeerArguments>(m, "PeerArguments")
      .def(py::init<>())
      .def_readwrite("config", &PeerArguments::config)
      .def_readwrite("overrides", &PeerArguments::overrides)
      .def_readwrite("rank", &PeerArguments::rank)
      .def_readwrite("out", &PeerArguments::out)
      .def_readwrite("hosts", &PeerArguments::hosts)
      .def_readwrite("tls_dir", &PeerArguments::tls_dir)
      .def_readwrite("join", &PeerArguments::join)
      .def_readwrite("advertise", &PeerArguments::advertise)
      .def_readwrite("resume_round", &PeerArguments::resume_round)
      .def_readwrite("until_round", &PeerArguments::until_round)
      .def_readwrite("leave_at_round", &PeerArguments::leave_at_round)
      .def_readwrite("events_fd", &PeerArguments::events_fd)
      .def_readwrite("events", &PeerArguments::events)
      .def_readwrite("rejoin", &PeerArguments::rejoin);
  m.def("peer_arguments", [](const std::vector<std::string>& args) {
    std::optional<PeerArguments> a = parse_peer_arguments(args);
    if (!a) throw InputError("gossip.Peer takes no --help");
    return *a;
  }, py::arg("args"), "gossip peer's argument list (as gossip run --exec passes it) as typed "
                      "PeerArguments");
}

void bind_peer(py::module_& m) {
  py::class_<Peer> peer(m, "Peer");
  peer
      .def(py::init(&peer_from_arguments), py::arg("arguments"),
           "A peer from gossip peer's options (PeerArguments)")
      .def_property_readonly("rank", [](const Peer& p) { return p.session->rank(); })
      .def_property_readonly("size", [](const Peer& p) { return p.session->size(); })
      .def_property_readonly("joined", [](const Peer& p) { return p.session->joined(); })
      .def_property_readonly("finished", [](const Peer& p) { return p.session->finished(); })
      .def_property_readonly("rounds_done", [](const Peer& p) { return p.session->rounds_done(); })
      .def_property_readonly("planned_rounds",
                             [](const Peer& p) { return p.session->planned_rounds(); })
      .def_property_readonly("config_values",
                             [](const Peer& p) { return config_dict(p.session->config()); })
      .def("shard", [](const Peer& p) { return p.session->shard(); },
           "This rank's shard: indices into the training set, as gossip peer draws it");
  bind_peer_rounds(peer);
  bind_peer_end(peer);
}

/// gossip.Peer's joining and its rounds: the buffer it mixes, traces, the average, the
/// parameters (bind_peer's middle).
void bind_peer_rounds(py::class_<Peer>& peer) {
  peer
      .def("join", [](Peer& p, const py::buffer& buffer, const std::string& model,
                      std::int64_t rounds) {
             const std::span<float> params = float_buffer(buffer, "join");
             p.claim();
             try {
               py::gil_scoped_release release;
               p.session->join(params, model, rounds);
             } catch (...) {
               p.release();
               throw;
             }
             p.buffer_owner = buffer;
           },
           py::arg("buffer"), py::arg("model"), py::arg("rounds") = 0)
      .def("join_model", [](Peer& p) {
             p.claim();
             try {
               py::gil_scoped_release release;
               p.session->join_model();
             } catch (...) {
               p.release();
               throw;
             }
           })
      .def("check_buffer", [](Peer& p, const py::buffer& buffer) {
             const std::span<float> b = float_buffer(buffer, "neighbor_average");
             const std::span<float> mine = p.session->params();
             if (b.size() != mine.size())
               throw InputError(cat("neighbor_average: the tensor has ", b.size(),
                                    " values but this peer joined with ", mine.size(),
                                    " (the neighbours' size)"));
             if (b.data() != mine.data())
               throw InputError("neighbor_average: the tensor is not the buffer this peer "
                                "joined with (mixing happens in place in that one buffer)");
           })
      .def("trace_now", [](const Peer& p) { return p.session->trace_now(); })
      .def("trace_overlap", [](Peer& p, std::int64_t round, const std::string& part,
                               double start, double end) {
             p.session->trace_overlap(round, part, start, end);
           })
      .def("average", [](Peer& p) {
             py::gil_scoped_release release;
             return p.session->average();
           })
      .def("params", [](Peer& p) {
             const std::span<float> s = p.session->params();
             return py::memoryview::from_buffer(s.data(), {static_cast<py::ssize_t>(s.size())},
                                                {static_cast<py::ssize_t>(sizeof(float))});
           })
      .def("eval_due", [](const Peer& p) { return p.session->eval_due(); })
      .def("resume_state", [](const Peer& p) -> py::object {
             const auto state = p.session->resumed_state();
             if (!state) return py::none();
             return py::bytes(reinterpret_cast<const char*>(state->data()), state->size());
           });
}

/// gossip.Peer's checkpoints, stop, reports and end (bind_peer's second half).
void bind_peer_end(py::class_<Peer>& peer) {
  peer
      .def("checkpoint_due", [](const Peer& p, std::int64_t every) {
             return p.session->checkpoint_due(every);
           }, py::arg("every") = -1)
      .def("save_checkpoint", [](Peer& p, const py::bytes& state) {
             const std::string_view bytes = state;
             const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
             py::gil_scoped_release release;
             p.session->save_checkpoint({data, bytes.size()});
           }, py::arg("state"))
      .def("stop_due", [](const Peer& p) { return p.session->stop_due(); })
      .def("request_leave", [](Peer& p) { p.session->request_leave(); },
           "An elastic run: announce this peer's leave at the next round")
      .def("leave_due", [](const Peer& p) { return p.session->leave_due(); },
           "An elastic run: whether this peer's leave takes effect now (finish then)")
      .def("partition_stop_due", [](const Peer& p) { return p.session->partition_stop_due(); })
      .def("stop", [](Peer& p) {
             {
               py::gil_scoped_release release;
               p.session->stop();
             }
             p.release();
             p.buffer_owner = py::none();
           })
      .def("report", [](Peer& p, double loss, double accuracy, double epoch) {
             py::gil_scoped_release release;
             p.session->report(loss, accuracy, epoch);
           },
           py::arg("loss"), py::arg("accuracy"), py::arg("epoch") = -1.0)
      .def("dead_peers", [](const Peer& p) { return p.session->dead_peers(); })
      .def("live_graph", [](const Peer& p) {
             return graph_dict(p.session->live_graph(), p.session->dead_peers());
           })
      .def("finish", [](Peer& p, bool awaits_average) {
             Summary s;
             {
               py::gil_scoped_release release;
               s = p.session->finish(awaits_average);
             }
             p.release();
             p.buffer_owner = py::none();
             py::dict d;
             // No evaluation (no report(), no evaluate): no figure, as summary.json's null.
             if (std::isnan(s.last.test_accuracy)) d["test_accuracy"] = py::none();
             else d["test_accuracy"] = s.last.test_accuracy;
             d["rounds"] = s.end.rounds;
             d["bytes_sent"] = s.end.bytes_sent;
             d["wall_seconds"] = s.end.wall_seconds;
             d["connected"] = s.end.connected;
             d["params_sha256"] = s.end.params_sha256;
             return d;
           },
           py::arg("awaits_average") = false,
           "Writes params.bin, summary.json and the done event (saying whether this process "
           "waits for the launcher's average model) and leaves the network");
}

void bind_data_functions(py::module_& m);
void bind_topology_functions(py::module_& m);

/// The module's functions: the algorithm table, data, configs, topologies, the simulator.
void bind_functions(py::module_& m) {
  m.def("algorithms", [] {
    py::list rows;
    for (const AlgorithmTraits& t : algorithm_table()) {
      py::dict d;
      d["name"] = t.name;
      d["summary"] = t.summary;
      d["compresses"] = t.compresses;
      d["overlaps"] = t.overlaps;
      d["elastic"] = t.elastic;
      d["outer_step"] = t.outer_step;
      d["partial_buffers"] = t.partial_buffers;
      d["robust"] = t.not_robust == nullptr;
      rows.append(d);
    }
    return rows;
  }, "Every gossip algorithm's row of the algorithm table: its name, summary and traits.");
  m.def("valid_checkpoints", [](const std::string& dir, int rank) {
    std::vector<std::string> refused;
    auto rounds = valid_checkpoints(dir, rank, &refused);
    return py::make_tuple(rounds, refused);
  }, py::arg("dir"), py::arg("rank"),
     "The rounds of DIR's checkpoints that decode and are rank RANK's, ascending, and what was "
     "refused (\"FILE: why\" each).");
  bind_data_functions(m);
  bind_topology_functions(m);
}

/// The data reader, a script's config values and its learning rate (bind_functions' second part).
void bind_data_functions(py::module_& m) {
  m.def("load_idx", [](const std::string& images, const std::string& labels, int classes) {
    Dataset d;
    {
      py::gil_scoped_release release;
      d = load_idx(images, labels, classes);
    }
    py::bytes pixels(reinterpret_cast<const char*>(d.pixels.data()), d.pixels.size());
    py::bytes y(reinterpret_cast<const char*>(d.y.data()), d.y.size() * sizeof(std::int32_t));
    return py::make_tuple(pixels, y, d.n, d.dim);
  }, py::arg("images"), py::arg("labels"), py::arg("classes") = 10,
     "gossip's IDX reader (plain or .gz): (pixel bytes, int32 label bytes, rows, features)");
  m.def("peer_config", [](const PeerArguments& arguments) {
    PeerSetup s = peer_setup(arguments);
    py::dict d = config_dict(s.config);
    d["rank"] = s.options.rank;
    d["size"] = s.topology->n();
    return d;
  }, "The run config's values a script needs, from gossip peer's arguments (no peer made)");
  m.def("learning_rate", [](const py::dict& config, double epoch) {
    OptimizerConfig o;
    o.lr = config["lr"].cast<double>();
    o.schedule = parse_choice(lr_schedule_table(), config["schedule"].cast<std::string>(),
                              "schedule");
    o.warmup_epochs = config["warmup_epochs"].cast<double>();
    o.min_lr = config["min_lr"].cast<double>();
    o.step_epochs = config["step_epochs"].cast<double>();
    o.gamma = config["gamma"].cast<double>();
    return learning_rate(o, epoch, config["epochs"].cast<double>());
  }, py::arg("config"), py::arg("epoch"),
     "optimizer.lr under optimizer.schedule (constant, step, cosine; warm-up) at `epoch` "
     "(fractional) of train.epochs: the schedule gossip peer's own trainer follows");
}

/// The topology report and generators, and the simulator (bind_functions' last part).
void bind_topology_functions(py::module_& m) {
  m.def("topology_report", [](const std::string& file) {
    std::optional<Topology> t;
    TopologyReport r;
    {
      py::gil_scoped_release release;
      t = load_topology(file);
      r = analyze(*t, kNeighboursGamma);
    }
    const PyDict report = topology_report_object<PyDict, PyList>(file, *t, r);
    return py::make_tuple(report.dict, r.connected ? kExitOk : kExitDisconnected);
  }, "The report of `gossip topo FILE --json` as a dict (built by the same code), and its "
     "exit code");
  m.def("generator_yaml", [](const std::string& kind, int n, int rows, int cols, int k,
                             int degree, double p, double beta, std::uint64_t seed,
                             bool directed, int s, int period) {
    GeneratorSpec spec{.kind = parse_generator(kind), .n = n, .rows = rows, .cols = cols, .k = k,
                       .degree = degree, .p = p, .beta = beta, .seed = seed, .s = s,
                       .period = period, .directed = directed, .weights = {}};
    make_topology(spec);  // refuses parameters that do not fit, with the generator's message
    return to_yaml(spec);
  });
  m.def("simulate", [](const std::string& config_path, const std::string& out) {
    const RunConfig config = load_config(config_path);
    int code = 0;
    {
      py::gil_scoped_release release;
      code = run_simulation(config, out, false);
    }
    return code;
  }, "gossip sim CONFIG --out OUT in this process; returns its exit code (the results are the "
     "run's files in OUT, summary.json first)");
}

}  // namespace

PYBIND11_MODULE(_gossip, m) {
  m.doc() = "gossip's C++ engine: peers, topologies and the simulator";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const gossip::RuntimeError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  bind_arguments(m);
  bind_peer(m);
  bind_functions(m);
}
