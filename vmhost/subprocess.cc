#include "vmhost/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace warren {
namespace {

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const ProcessOptions& options) {
  if (argv.empty()) return InvalidArgument("no program to run");
  // Everything the child needs is built before fork: after it, only syscalls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  // glibc's getenv takes the first match, so our entries go first to win.
  for (const std::string& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(Errno("pipe"));
  int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (dev_null < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return Internal(Errno("open /dev/null"));
  }
  // The child's stdin: /dev/null, or a socket pair we fill with options.input — a socket, not
  // a pipe, so a child that exits without reading it all fails our send with EPIPE
  // (MSG_NOSIGNAL) rather than raise SIGPIPE in a process that has not ignored it.
  int in_fds[2] = {-1, -1};
  if (!options.input.empty() && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_fds) != 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    close(dev_null);
    return Internal(Errno("socketpair"));
  }
  const int child_stdin = in_fds[0] >= 0 ? in_fds[0] : dev_null;
  // The child reads in_fds[0]; we write in_fds[1] as it reads, without blocking.
  size_t in_written = 0;

  pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    close(dev_null);
    if (in_fds[0] >= 0) {
      close(in_fds[0]);
      close(in_fds[1]);
    }
    return Internal(Errno("fork"));
  }
  if (pid == 0) {
    if (options.new_session) {
      setsid();
    } else {
      setpgid(0, 0);  // its own group, so a timeout kills the whole tree
    }
    dup2(child_stdin, 0);
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    // Nothing of ours (listening sockets, LMDB, libvirt connections) leaks into the child.
    close_range(3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.child_setup && options.child_setup() != 0) _exit(127);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  close(dev_null);
  int in_fd = -1;  // our end of the child's stdin while input is left to write
  if (in_fds[0] >= 0) {
    close(in_fds[0]);
    in_fd = in_fds[1];
  }

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  bool pipe_open = true;
  bool exited = false;
  int wstatus = 0;
  char buf[4096];
  while (true) {
    if (!exited) {
      pid_t w = waitpid(pid, &wstatus, WNOHANG);
      if (w == pid) exited = true;
    }
    // A daemon's grandchild may keep the pipe open after our child exits: once the child
    // is gone, take what is already there and stop.
    if (exited && !pipe_open) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline && !exited) {
      result.timed_out = true;
      break;
    }
    int wait_ms = exited ? 0 : 50;
    if (in_fd >= 0) {
      // A child that stops reading (or exits) ends the input (EPIPE).
      ssize_t put = send(in_fd, options.input.data() + in_written,
                         options.input.size() - in_written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (put > 0) in_written += static_cast<size_t>(put);
      if (in_written == options.input.size() || (put < 0 && errno != EAGAIN && errno != EINTR)) {
        close(in_fd);
        in_fd = -1;
      }
    }
    if (pipe_open) {
      pollfd p{pipe_fds[0], POLLIN, 0};
      int n = poll(&p, 1, wait_ms);
      if (n > 0) {
        ssize_t got = read(pipe_fds[0], buf, sizeof(buf));
        if (got > 0) {
          size_t room = options.max_output - std::min(options.max_output, result.output.size());
          result.output.append(buf, std::min(room, static_cast<size_t>(got)));
          if (options.stop_when && options.stop_when(result.output)) {
            result.stopped_early = true;
            break;
          }
          continue;
        }
        if (got == 0 || (errno != EINTR && errno != EAGAIN)) pipe_open = false;
      } else if (exited) {
        break;  // nothing more buffered
      }
    } else {
      usleep(wait_ms * 1000);
    }
  }
  close(pipe_fds[0]);
  if (in_fd >= 0) close(in_fd);
  if (!exited) {
    kill(-pid, SIGKILL);  // the child leads its own group either way
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  if (result.timed_out || result.stopped_early) result.exit_code = -1;
  return result;
}

}  // namespace warren
