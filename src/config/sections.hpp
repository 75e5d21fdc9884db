// config/sections.hpp: the readers of a run config's sections, one file each beside its
// section's tables (config_train.cpp: data, model, optimizer, train; config_gossip.cpp: gossip
// and its checks; config_network.cpp: monitor, sim, net; config_faults.cpp: faults and
// compare), called by load_config.cpp. Private to the room.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "src/config/sections.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <string>
#include <vector>

#include "src/config/reader.hpp"

namespace gossip::sections {

void read_data(const Reader& r, const Node& n, DataConfig& d);
void read_model(const Reader& r, const Node& n, ModelConfig& m);
void read_optimizer(const Reader& r, const Node& n, OptimizerConfig& o);
void read_train(const Reader& r, const Node& n, TrainConfig& t);
/// The model's shapes against the data (input size, classes), once every section is read.
void check_model(const RunConfig& cfg);

CompressConfig read_compress(const Reader& r, const Node& n, const std::string& field);
AggregateConfig read_aggregate(const Reader& r, const Node& n, const std::string& field);
/// gossip.outer's keys, read into `c` (which they enable): compare.outer's cells take them too.
Handlers outer_handlers(const Reader& r, OuterConfig& c);
void read_gossip(const Reader& r, const Node& n, GossipConfig& g);
/// The gossip keys against the algorithm (and the sweep's algorithms) that would read them.
void check_gossip_keys(const RunConfig& cfg);

void read_monitor(const Reader& r, const Node& n, MonitorConfig& m);
void read_sim(const Reader& r, const Node& n, SimConfig& s);
void read_net(const Reader& r, const Node& n, NetworkConfig& c);

Fault read_fault(const Reader& r, const Node& item, const std::string& at);
std::vector<Fault> read_faults(const Reader& r, const Node& n, const std::string& field);
void read_compare(const Reader& r, const Node& n, CompareConfig& c);

}  // namespace gossip::sections
