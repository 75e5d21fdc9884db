// cli/keys.cpp: `gossip keys init DIR` — a run's TLS credentials: a CA (or a site's own) and one
// key and certificate per rank, which net.tls then names; `gossip keys add DIR --rank R` — one
// more rank's, issued by the CA in DIR (whoever holds ca.key admits a peer; no server).
#include <cstdio>
#include <chrono>
#include <cstring>
#include <filesystem>
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
    "       gossip keys add DIR --rank R [--config CONFIG] [--run-id ID] [--days D] [--force]\n"
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
    "keys add issues one more rank's key and certificate, DIR/peer-R.key and DIR/peer-R.pem,\n"
    "with the CA of DIR (DIR/ca.pem and DIR/ca.key, as keys init wrote them): a new identity for\n"
    "a peer that joins an elastic run. The run id comes from --run-id or the config's\n"
    "net.run_id and must be the one the CA's other certificates name; with --config on an\n"
    "elastic topology R must be below its max_peers.\n"
    "  --rank R          the rank to admit\n"
    "\n"
    "exit codes: 0 done, 1 could not write, 2 bad arguments, topology, config or CA files\n";

/// --days D, 1..36500 (default 365).
int days_option(const Args& args) {
  const long days = args.get_int("days", 365);
  if (days < 1 || days > 36500) throw InputError(cat("--days: expected 1..36500, got ", days));
  return static_cast<int>(days);
}

/// `gossip keys add DIR --rank R`: one more rank's credentials from DIR's CA.
int add_rank(const Args& args) {
  const auto& pos = args.positional();
  if (pos.size() != 2) throw InputError("keys add: give exactly one folder, DIR");
  for (const char* option : {"peers", "topology", "ca-cert", "ca-key"})
    if (args.has(option)) throw InputError(cat("keys add: --", option, " is for keys init"));
  if (!args.has("rank")) throw InputError("keys add: which rank? give --rank R");
  const long rank = args.get_int("rank", -1);
  if (rank < 0 || rank >= 65536) throw InputError(cat("--rank: expected 0..65535, got ", rank));
  std::string run_id = "gossip";
  if (auto path = args.get("config")) {
    const RunConfig config = load_config(*path);
    run_id = config.net.run_id;
    if (!config.gossip.topology.empty()) {
      const Topology t = load_topology(config.gossip.topology);
      const int ranks = t.elastic() ? t.elastic()->max_peers : t.n();
      if (rank >= ranks)
        throw InputError(cat("--rank ", rank, ": ", config.gossip.topology, " has ranks 0..",
                             ranks - 1, t.elastic() ? " (max_peers)" : " (not elastic: its peers "
                             "are fixed)"));
    }
  }
  run_id = args.get_or("run-id", run_id);
  const std::filesystem::path dir = pos[1];
  const TlsConfig files = tls_files_in(dir, static_cast<int>(rank));
  std::error_code ec;
  if (std::filesystem::exists(files.cert, ec) && !args.has("force"))
    throw InputError(cat(files.cert, " already exists (pass --force to issue it again)"));
  const CertificateAuthority ca = CertificateAuthority::load((dir / "ca.pem").string(),
                                                             (dir / "ca.key").string());
  ca.issue(run_id, static_cast<int>(rank), files.cert, files.key, std::chrono::hours(-1),
           std::chrono::hours(24) * days_option(args));
  std::printf("gossip keys: wrote %s and %s for rank %ld of run '%s'\n", files.key.c_str(),
              files.cert.c_str(), rank, run_id.c_str());
  return kExitOk;
}

}  // namespace

int run_keys(int argc, char** argv) {
  Args args(argc, argv,
            {"peers", "topology", "config", "run-id", "days", "ca-cert", "ca-key", "rank"},
            {"force"});
  if (args.help() || args.positional().empty()) {
    std::printf("%s", kKeysHelp);
    return args.help() ? kExitOk : kExitBadInput;
  }
  const auto& pos = args.positional();
  if (pos[0] == "add") return add_rank(args);
  if (pos[0] != "init")
    throw InputError(cat("unknown keys command '", pos[0], "' (see gossip keys --help)"));
  if (args.has("rank")) throw InputError("keys init: --rank is for keys add");
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
  opt.days = days_option(args);
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
