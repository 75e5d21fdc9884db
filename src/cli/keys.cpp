// cli/keys.cpp: `gossip keys init DIR` — a run's TLS credentials: a CA (or a site's own) and one
// key and certificate per rank, which net.tls then names.
#include <cstdio>
#include <cstring>
#include <optional>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {
namespace {

const char* kKeysHelp =
    "usage: gossip keys init DIR [--peers N | --topology FILE] [--config CONFIG]\n"
    "                            [--run-id ID] [--days D] [--ca-cert FILE --ca-key FILE]\n"
    "                            [--force]\n"
    "\n"
    "Creates the TLS credentials of one run in DIR (made readable by you only): a new CA\n"
    "(DIR/ca.pem, its key DIR/ca.key) and, for each rank R, an ECDSA P-256 key DIR/peer-R.key\n"
    "and a certificate DIR/peer-R.pem signed by the CA whose subjectAltName URI\n"
    "gossip://RUN/rank/R names the run and the rank. Every file is mode 0600. Then name them in\n"
    "the config:\n"
    "\n"
    "  net:\n"
    "    run_id: RUN\n"
    "    tls:\n"
    "      ca: DIR/ca.pem\n"
    "      cert: DIR/peer-{rank}.pem     # {rank}: each peer's own rank\n"
    "      key: DIR/peer-{rank}.key\n"
    "\n"
    "or pass `gossip peer ... --tls-dir DIR`. Copy ca.pem and each rank's two files to the\n"
    "machine that runs that rank; ca.key stays with whoever issues certificates.\n"
    "(`gossip run` makes fresh credentials in its output folder by itself when the config\n"
    "names none.)\n"
    "\n"
    "options:\n"
    "  --peers N         ranks 0..N-1\n"
    "  --topology FILE   as many ranks as the topology file has peers\n"
    "  --config CONFIG   its net.run_id, and (unless --peers or --topology) the ranks of its\n"
    "                    gossip.topology\n"
    "  --run-id ID       the run the certificates are for (default: the config's net.run_id,\n"
    "                    else 'gossip'); peers refuse certificates of another run\n"
    "  --days D          validity of the certificates (default 365)\n"
    "  --ca-cert FILE    issue with an existing CA (e.g. your site's) instead of a new one:\n"
    "  --ca-key FILE     its certificate and unencrypted PEM key; DIR/ca.pem is a copy of it\n"
    "  --force           replace the credentials already in DIR\n"
    "\n"
    "exit codes: 0 done, 1 could not write, 2 bad arguments, topology, config or CA files\n";

}  // namespace

int run_keys(int argc, char** argv) {
  Args args(argc, argv, {"peers", "topology", "config", "run-id", "days", "ca-cert", "ca-key"},
            {"force"});
  if (args.help() || args.positional().empty()) {
    std::printf("%s", kKeysHelp);
    return args.help() ? kExitOk : kExitBadInput;
  }
  const auto& pos = args.positional();
  if (pos[0] != "init")
    throw InputError(cat("unknown keys command '", pos[0], "' (see gossip keys --help)"));
  if (pos.size() != 2) throw InputError("keys init: give exactly one folder, DIR");
  if (args.has("peers") && args.has("topology"))
    throw InputError("keys init: give --peers N or --topology FILE, not both");
  if (!args.has("peers") && !args.has("topology") && !args.has("config"))
    throw InputError("keys init: how many ranks? give --peers N, --topology FILE or --config "
                     "CONFIG");

  KeySetOptions opt;
  std::string topology_file = args.get_or("topology", "");
  if (auto path = args.get("config")) {
    const RunConfig config = load_config(*path);
    opt.run_id = config.net.run_id;
    if (topology_file.empty() && !args.has("peers")) {
      if (config.gossip.topology.empty())
        throw InputError(cat(config.path, ": gossip.topology: needed to know how many ranks "
                             "(or give --peers N or --topology FILE)"));
      topology_file = config.gossip.topology;
    }
  }
  if (!topology_file.empty()) {
    opt.peers = load_topology(topology_file).n();
  } else {
    const long n = args.get_int("peers", 0);
    if (n < 1 || n > 1'000'000) throw InputError(cat("--peers: expected 1..1000000, got ", n));
    opt.peers = static_cast<int>(n);
  }
  opt.run_id = args.get_or("run-id", opt.run_id);
  if (opt.run_id.size() > NetworkConfig::kMaxRunIdBytes)
    throw InputError(cat("--run-id: at most ", NetworkConfig::kMaxRunIdBytes, " bytes"));
  const long days = args.get_int("days", 365);
  if (days < 1 || days > 36500) throw InputError(cat("--days: expected 1..36500, got ", days));
  opt.days = static_cast<int>(days);
  opt.overwrite = args.has("force");
  std::optional<CertificateAuthority> site;
  if (args.has("ca-cert") || args.has("ca-key")) {
    site.emplace(CertificateAuthority::load(args.required("ca-cert", "FILE"),
                                            args.required("ca-key", "FILE")));
    opt.ca = &*site;
  }
  create_key_set(pos[1], opt);
  std::printf("gossip keys: wrote %s/ca.pem%s and keys and certificates for ranks 0..%d of run "
              "'%s' (valid %d days)\n",
              pos[1].c_str(), opt.ca ? " (a copy of the given CA)" : " and ca.key", opt.peers - 1,
              opt.run_id.c_str(), opt.days);
  return kExitOk;
}

}  // namespace gossip::cli
