// launcher/children.hpp: child peer processes — started with descriptor 3 on a pipe (event
// lines, gossip peer --events-fd 3) and stdout and stderr in a log file, in their own process group so Ctrl-C reaches only the
// launcher, which then stops them; they also die with the launcher (PR_SET_PDEATHSIG).
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/children.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <sys/types.h>

#include <string>
#include <vector>

namespace gossip::launcher {

/// The descriptor a child writes its event lines to (gossip peer --events-fd).
inline constexpr int kEventsFd = 3;

struct Child {
  int rank = -1;
  pid_t pid = -1;
  int out_fd = -1;          // read end of the child's event pipe (its descriptor 3)
  std::string buffer;       // partial line
  std::string log_path;     // the child's stdout and stderr
  bool running = false;
  int exit_code = 0;        // valid once !running; 128+signal when killed
  long max_rss_kb = 0;      // peak resident set size (ru_maxrss) once reaped
  /// A peer in another rank's process (train.peers_per_process): the index of that rank's
  /// Child, whose pid this one shares and whose end is this one's; -1: a process of its own.
  int leader = -1;
};

/// Starts `argv` (argv[0] is the program path) as rank `rank`.
Child spawn_child(int rank, const std::vector<std::string>& argv, const std::string& log_path,
                  bool append_log = false);
/// Starts `argv` as the `count` consecutive ranks from `first` in one process (gossip peer
/// --ranks): rank first + i's event lines come on the child's descriptor kEventsFd + i. The
/// first Child is the process's; the others follow it (leader: its index, `leader_index`).
std::vector<Child> spawn_group(int first, int count, int leader_index,
                               const std::vector<std::string>& argv, const std::string& log_path);

/// Reads what is available; appends complete lines to `lines`. Returns false at end of file.
bool read_lines(Child& c, std::vector<std::string>& lines);

/// Reaps the child if it has exited (non-blocking). Returns true when it is no longer running.
bool reap(Child& c);
/// The same for a child of `all`: one that follows another's process (leader >= 0) ends when
/// that one has been reaped, with its exit code and peak memory. `all` lists a leader before
/// its followers.
bool reap(std::vector<Child>& all, Child& c);

/// SIGTERM to every running child, then SIGKILL to those still running after `grace_ms`.
void stop_all(std::vector<Child>& children, int grace_ms);

/// The last `n` lines of a file (for saying why a peer failed).
std::string tail_lines(const std::string& path, int n);

}  // namespace gossip::launcher
