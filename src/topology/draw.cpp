// topology/draw.cpp: a random generator can draw a disconnected graph (erdos-renyi with a small
// p, random-regular with degree 2, ...), on which no amount of gossip makes the peers agree.
// draw_connected tries the asked seed, then the next ones, so `gossip topo --generate
// --resample` can write a connected graph whose file still names the seed that reproduces it.
#include <algorithm>

#include "gossip/core.hpp"
#include "gossip/topology.hpp"

namespace gossip {

Draw draw_connected(const GeneratorSpec& spec, int max_draws) {
  const bool seeded = traits(spec.kind).seeded();
  Draw d{.spec = spec, .first_seed = spec.seed, .draws = 0, .topology = {}, .components = {}};
  for (;;) {
    d.topology = make_topology(d.spec);
    d.components = connected_components(d.topology);
    ++d.draws;
    if (d.connected() || !seeded || d.draws >= max_draws || d.spec.seed >= kMaxTopologySeed)
      return d;
    ++d.spec.seed;
  }
}

}  // namespace gossip
