// launcher/children.cpp: fork/exec of peer processes and their orderly end.
#include "src/launcher/children.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "gossip/core.hpp"

namespace gossip::launcher {
namespace {

/// One process for `count` ranks from `first`, each with its event pipe (kEventsFd + i).
std::vector<Child> spawn_process(int first, int count, int leader_index,
                                 const std::vector<std::string>& argv, const std::string& log_path,
                                 bool append_log) {
  std::vector<std::array<int, 2>> pipes(static_cast<std::size_t>(count));
  for (auto& p : pipes)
    if (pipe2(p.data(), O_CLOEXEC) != 0) throw RuntimeError(cat("pipe: ", std::strerror(errno)));
  const int log_fd = open(log_path.c_str(),
                          O_WRONLY | O_CREAT | (append_log ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
  if (log_fd < 0) throw RuntimeError(cat(log_path, ": cannot open: ", std::strerror(errno)));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw RuntimeError(cat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // In the child: only async-signal-safe calls until exec.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    // Events on their own descriptors (gossip peer --events-fd 3): what the peer or its script
    // prints goes to the log with stderr, and can never split an event line.
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    // Each write end first above every target descriptor, then onto its own: a write end that
    // happens to be numbered like another's target is not overwritten before it is moved.
    for (int i = 0; i < count; ++i) {
      const int high = fcntl(pipes[static_cast<std::size_t>(i)][1], F_DUPFD_CLOEXEC,
                             kEventsFd + count);
      if (high < 0) _exit(127);
      pipes[static_cast<std::size_t>(i)][1] = high;
    }
    for (int i = 0; i < count; ++i)  // dup2 clears close-on-exec: these are kept across exec
      if (dup2(pipes[static_cast<std::size_t>(i)][1], kEventsFd + i) < 0) _exit(127);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  std::vector<Child> out;
  for (int i = 0; i < count; ++i) {
    auto& p = pipes[static_cast<std::size_t>(i)];
    close(p[1]);
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    Child c;
    c.rank = first + i;
    c.pid = pid;
    c.out_fd = p[0];
    c.log_path = log_path;
    c.running = true;
    c.leader = i == 0 ? -1 : leader_index;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Child spawn_child(int rank, const std::vector<std::string>& argv, const std::string& log_path,
                  bool append_log) {
  return std::move(spawn_process(rank, 1, -1, argv, log_path, append_log).front());
}

std::vector<Child> spawn_group(int first, int count, int leader_index,
                               const std::vector<std::string>& argv, const std::string& log_path) {
  return spawn_process(first, count, leader_index, argv, log_path, false);
}

bool read_lines(Child& c, std::vector<std::string>& lines) {
  if (c.out_fd < 0) return false;
  char buf[8192];
  for (;;) {
    const ssize_t got = read(c.out_fd, buf, sizeof buf);
    if (got > 0) {
      c.buffer.append(buf, static_cast<std::size_t>(got));
      std::size_t pos;
      while ((pos = c.buffer.find('\n')) != std::string::npos) {
        lines.push_back(c.buffer.substr(0, pos));
        c.buffer.erase(0, pos + 1);
      }
      continue;
    }
    if (got == 0) {
      close(c.out_fd);
      c.out_fd = -1;
      return false;
    }
    if (errno == EINTR) continue;
    return true;  // EAGAIN: nothing more now
  }
}

bool reap(Child& c) {
  if (!c.running) return true;
  int status = 0;
  struct rusage usage {};
  const pid_t r = wait4(c.pid, &status, WNOHANG, &usage);
  if (r == 0) return false;
  c.running = false;
  if (r > 0) c.max_rss_kb = usage.ru_maxrss;
  if (r < 0) {
    c.exit_code = 1;
  } else if (WIFEXITED(status)) {
    c.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    c.exit_code = 128 + WTERMSIG(status);
  }
  return true;
}

bool reap(std::vector<Child>& all, Child& c) {
  if (c.leader < 0) return reap(c);
  if (!c.running) return true;
  const Child& leader = all[static_cast<std::size_t>(c.leader)];
  if (leader.running) return false;
  c.running = false;
  c.exit_code = leader.exit_code;
  c.max_rss_kb = leader.max_rss_kb;
  return true;
}

void stop_all(std::vector<Child>& children, int grace_ms) {
  for (auto& c : children)  // its process group: an exec: script's shell and Python too
    if (c.running && c.leader < 0) kill(-c.pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (;;) {
    bool any = false;
    for (auto& c : children) any |= !reap(children, c);
    if (!any) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (auto& c : children)
        if (c.running && c.leader < 0) kill(-c.pid, SIGKILL);
      for (auto& c : children)
        if (c.running && c.leader < 0) {
          int status = 0;
          waitpid(c.pid, &status, 0);
          c.running = false;
          c.exit_code = 128 + SIGKILL;
        }
      for (auto& c : children) reap(children, c);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& c : children)
    if (c.out_fd >= 0) {
      close(c.out_fd);
      c.out_fd = -1;
    }
}

std::string tail_lines(const std::string& path, int n) {
  std::ifstream f(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(f, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > n) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "    " + l + "\n";
  return out;
}

}  // namespace gossip::launcher
