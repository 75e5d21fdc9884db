// config/config_faults.cpp: the fault schedule (faults:, one entry a fault) and the compare:
// section, whose attack and membership cells are fault entries.
#include "src/config/sections.hpp"

namespace gossip::sections {

/// A sweep's cells (compare.memberships, compare.attacks): each item `none` (`none_cell`) or a
/// map read by `read` at its field; `expected` says what a cell looks like.
template <typename Cell, typename Read>
std::vector<Cell> read_cells(const Reader& r, const Node& n, const std::string& field,
                             const char* expected, const Cell& none_cell, Read read) {
  r.sequence(n, field);
  std::vector<Cell> out;
  std::size_t i = 0;
  for (const Node& item : n) {
    const std::string at = cat(field, "[", i++, "]");
    r.mark(at, item.line());
    if (item.is_scalar()) {
      if (r.text(item, at) != "none")
        r.fail(item, at, cat("expected none or ", expected, ", got '", item.scalar(), "'"));
      out.push_back(none_cell);
      continue;
    }
    out.push_back(read(item, at));
  }
  return out;
}

/// compare.memberships: each item `none` (the static run) or {name: NAME, changes: [...]} with
/// join and leave entries of the fault schedule, read by its reader.
std::vector<CompareConfig::Membership> read_membership_cells(const Reader& r, const Node& n,
                                                             const std::string& field) {
  return read_cells(
      r, n, field, "{name: NAME, changes: [{round: R, join: [...]}, ...]}",
      CompareConfig::Membership{"static", {}}, [&](const Node& item, const std::string& at) {
        CompareConfig::Membership cell;
        r.each(item, at, Handlers{
            {"name", [&](auto& v, auto& f) { cell.name = r.text(v, f); }},
            {"changes", [&](auto& v, auto& f) {
               r.sequence(v, f);
               std::size_t k = 0;
               for (const Node& c : v) {
                 const std::string cf = cat(f, "[", k++, "]");
                 r.mark(cf, c.line());
                 Fault fault = read_fault(r, c, cf);
                 if (!is_membership(fault))
                   r.fail(c, cf, cat("a membership cell holds join and leave entries, not a ",
                                     fault_action_name(fault.action),
                                     " (put other faults in the config's faults:)"));
                 cell.changes.push_back(std::move(fault));
               }
             }},
        });
        if (cell.name.empty()) r.fail(item, at, "a membership cell needs its name");
        if (cell.changes.empty())
          r.fail(item, at, "a membership cell needs its changes (or none)");
        return cell;
      });
}

/// compare.attacks: each item `none` or an attack entry of the fault schedule, read by its
/// reader; any other action is refused (a sweep's cells differ by who lies, not who dies).
std::vector<Fault> read_attack_cells(const Reader& r, const Node& n, const std::string& field) {
  return read_cells(r, n, field, "an attack entry such as {round: 1, attack: [3], kind: sign_flip}",
                    Fault{}, [&](const Node& item, const std::string& at) {
                      Fault fault = read_fault(r, item, at);
                      if (fault.action != FaultAction::kAttack)
                        r.fail(item, at, cat("a sweep's cell is none or an attack entry ({round: "
                                             "1, attack: [3], kind: sign_flip}), not a ",
                                             fault_action_name(fault.action),
                                             " (put other faults in the config's faults:)"));
                      return fault;
                    });
}

void read_compare(const Reader& r, const Node& n, CompareConfig& c) {
  r.each(n, "compare", Handlers{
      {"topologies", [&](auto& v, auto& f) {
         for (const auto& s : r.texts(v, f)) c.topologies.push_back(r.resolve(s));
       }},
      {"algorithms", [&](auto& v, auto& f) {
         for (const auto& a : r.texts(v, f))
           c.algorithms.push_back(r.algorithm(v, f, a));
       }},
      {"periods", [&](auto& v, auto& f) { c.periods = r.ints(v, f); }},
      {"shards", [&](auto& v, auto& f) { c.shards = r.texts(v, f); }},
      {"seeds", [&](auto& v, auto& f) {
         c.seeds = r.list(v, f, [&](const Node& x, const std::string& g) { return r.seed(x, g); });
       }},
      {"target_accuracy", [&](auto& v, auto& f) { c.target_accuracy = r.positive(v, f, false); }},
      {"compress", [&](auto& v, auto& f) {
         r.sequence(v, f);
         std::size_t i = 0;
         for (const Node& item : v) c.compress.push_back(read_compress(r, item, cat(f, "[", i++, "]")));
       }},
      {"averaging_rounds", [&](auto& v, auto& f) {
         c.averaging_rounds = r.positive_int(v, f, true);
       }},
      {"aggregates", [&](auto& v, auto& f) {
         c.aggregates = r.list(v, f, [&](const Node& x, const std::string& g) {
           r.mark(g, x.line());
           return read_aggregate(r, x, g);
         });
       }},
      {"attacks", [&](auto& v, auto& f) { c.attacks = read_attack_cells(r, v, f); }},
      {"memberships", [&](auto& v, auto& f) { c.memberships = read_membership_cells(r, v, f); }},
      {"outer", [&](auto& v, auto& f) {
         c.outer = r.list(v, f, [&](const Node& x, const std::string& g) {
           CompareConfig::OuterCell cell;
           Handlers h = outer_handlers(r, cell.outer);
           h["name"] = [&](auto& w, auto& k) { cell.name = r.text(w, k); };
           h["period"] = [&](auto& w, auto& k) { cell.period = r.positive_int(w, k, false); };
           h["overlap"] = [&](auto& w, auto& k) { cell.overlap = r.boolean(w, k); };
           r.each(x, g, h);
           if (cell.name.empty()) r.fail(x, g, "each outer step needs its name (the row's label)");
           return cell;
         });
       }},
  });
}

/// An attack entry's kind and parameter, checked once the whole entry is read: `kind` the field
/// that named it ("" when none did), `given` the fields of s, std, z and epsilon with their values.
void check_attack(const Reader& r, const Node& item, const std::string& at, Fault& fault,
                  const std::string& kind,
                  const std::vector<std::pair<std::string, double>>& given) {
  if (fault.action != FaultAction::kAttack) {
    const char* name = fault_action_name(fault.action);
    if (!kind.empty()) r.fail_at(kind, cat("kind is for attack, not ", name));
    if (!given.empty()) r.fail_at(given.front().first, cat("is for attack, not ", name));
    return;
  }
  if (fault.peers.empty()) r.fail(item, at, "an attack names at least one attacking peer");
  if (kind.empty())
    r.fail(item, at, cat("an attack needs its kind (one of: ", attack_choices(), ")"));
  const AttackTraits& t = attack_traits(fault.attack);
  fault.parameter = t.default_value;
  for (const auto& [field, value] : given) {
    const std::string key = field.substr(field.rfind('.') + 1);
    if (key != t.parameter)
      r.fail_at(field, cat("is not a parameter of ", t.name, *t.parameter
                               ? cat(" (its parameter is ", t.parameter, ")")
                               : std::string(" (it has none)")));
    fault.parameter = value;
    const bool scale = fault.attack == AttackKind::kScale;
    const bool zero_ok = fault.attack == AttackKind::kAlie;
    if (!scale && (value < 0 || (value == 0 && !zero_ok)))
      r.fail_at(field, cat("must be ", zero_ok ? ">= 0" : "> 0", ", got ", value));
  }
  if (std::isnan(fault.parameter))
    r.fail(item, at, cat(t.name, " needs its parameter ", t.parameter, " (e.g. ", t.parameter,
                         ": -4)"));
  if (fault.to_round > 0 && fault.to_round <= fault.round)
    r.fail(item, at, "an attack's to_round comes after its round");
}

namespace {

/// The links a cut names (its action's key), each two different peers.
void read_fault_links(const Reader& r, const Node& v, const std::string& f, Fault& fault) {
  r.sequence(v, f);
  std::size_t k = 0;
  for (const Node& link : v) {
    const std::string lf = cat(f, "[", k++, "]");
    const std::vector<int> ends = r.ints(link, lf);
    if (ends.size() != 2 || ends[0] < 0 || ends[1] < 0 || ends[0] == ends[1])
      r.fail(link, lf, "a link is two different peers, e.g. [0, 1]");
    fault.links.emplace_back(ends[0], ends[1]);
  }
  if (fault.links.empty()) r.fail(v, f, cat("a ", fault_action_name(fault.action),
                                             " needs at least one link"));
}

/// The refusals once a whole entry is read: its round, its action, and the fields (seconds,
/// to_round) that are only for some actions.
void check_fault(const Reader& r, const Node& item, const std::string& at, const Fault& fault,
                 bool has_round) {
  const char* name = fault_action_name(fault.action);
  if (!has_round) r.fail(item, at, "a fault needs its round (from_round for a cut)");
  if (fault.action == FaultAction::kNone)
    r.fail(item, at, cat("a fault needs an action: ",
                         choice_list(fault_action_table())));
  if (fault.action == FaultAction::kPause && fault.seconds <= 0)
    r.fail(item, at, "a pause needs its length in seconds");
  if (fault.action != FaultAction::kPause && fault.seconds > 0)
    r.fail(item, at, cat("seconds is for pause, not ", name));
  if (fault.action == FaultAction::kCut && fault.to_round <= fault.round)
    r.fail(item, at, "a cut needs to_round after from_round");
  if (!traits(fault.action).spans && fault.to_round > 0) {
    const auto spans = [](const FaultActionTraits& t) { return t.spans; };
    std::vector<FaultActionTraits> spanning;
    for (const FaultActionTraits& t : fault_action_table())
      if (spans(t)) spanning.push_back(t);
    r.fail(item, at,
           cat("to_round is for ", choice_list(std::span<const FaultActionTraits>(spanning), "and"),
               ", not ", name));
  }
}

}  // namespace

/// One entry of a fault schedule, `at` its field ("faults[2]"): of faults: and of
/// compare.attacks alike, so an attack reads the same wherever it is written. The key that
/// names the peers or links is the action (fault_action_table).
Fault read_fault(const Reader& r, const Node& item, const std::string& at) {
  Fault fault;
  bool has_round = false;
  std::string kind;  // the field that named an attack's kind
  std::vector<std::pair<std::string, double>> given;  // an attack's parameter, as given
  auto peers = [&](const Node& v, const std::string& f) {
    fault.peers = r.ints(v, f);
    for (int p : fault.peers)
      if (p < 0) r.fail(v, f, cat("peer ", p, " is not a rank"));
  };
  auto round = [&](const Node& v, const std::string& f) {
    if (has_round) r.fail(v, f, "a fault has one round (or from_round for a cut)");
    fault.round = r.positive_int(v, f, false);
    has_round = true;
  };
  auto parameter = [&](const Node& v, const std::string& f) {
    given.emplace_back(f, r.number(v, f));
  };
  Handlers handlers{
      {"round", [&](auto& v, auto& f) { round(v, f); }},
      {"from_round", [&](auto& v, auto& f) { round(v, f); }},
      {"to_round", [&](auto& v, auto& f) { fault.to_round = r.positive_int(v, f, false); }},
      {"seconds", [&](auto& v, auto& f) { fault.seconds = r.positive(v, f, false); }},
      {"kind", [&](auto& v, auto& f) {
         const std::string name = r.text(v, f);
         for (const AttackTraits& t : attack_table())
           if (name == t.name) fault.attack = t.kind;
         if (fault.attack == AttackKind::kNone)
           r.fail(v, f, cat("unknown attack '", name, "' (expected one of: ", attack_choices(),
                            ")"));
         kind = f;
       }},
      {"s", parameter},
      {"std", parameter},
      {"z", parameter},
      {"epsilon", parameter},
  };
  for (const FaultActionTraits& row : fault_action_table())
    handlers.emplace(row.name, [&, row](const Node& v, const std::string& f) {
      if (fault.action != FaultAction::kNone)
        r.fail(v, f, cat("one action a fault: this one already says ",
                         fault_action_name(fault.action)));
      fault.action = row.kind;
      if (row.links) read_fault_links(r, v, f, fault);
      else peers(v, f);
    });
  r.each(item, at, handlers);
  check_fault(r, item, at, fault, has_round);
  check_attack(r, item, at, fault, kind, given);
  return fault;
}

std::vector<Fault> read_faults(const Reader& r, const Node& n, const std::string& field) {
  r.sequence(n, field);
  std::vector<Fault> out;
  std::size_t i = 0;
  for (const Node& item : n) out.push_back(read_fault(r, item, cat(field, "[", i++, "]")));
  return out;
}

}  // namespace gossip::sections
