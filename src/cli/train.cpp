#include "args.hpp"
#include "gossip/core.hpp"
namespace gossip::cli {
int run_train(int, char**) { throw RuntimeError("not built yet"); }
}
