#include "args.hpp"
#include "gossip/core.hpp"
namespace gossip::cli {
int run_bench(int, char**) { throw RuntimeError("not built yet"); }
}
