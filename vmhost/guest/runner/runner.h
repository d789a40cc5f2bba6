// warren-run's internal interfaces, shared by its C files (warren-run.c, header.c, jobdir.c,
// attach.c, serve.c, identity.c, identity_wait.c, seed.c). The runner is a small static program
// that runs inside the guest as the VM user (as root: `identity` and `identity-wait`, through sudo
// or handed to the waiting process, and `apply-seed` at boot); the wire protocol it speaks with the
// host is described in vmhost/guest/README.md and mirrored on the host by
// vmhost/guest/runner_protocol.h (identity's by vmhost/guest/identity.h). Single-threaded.
#ifndef WARREN_RUNNER_H_
#define WARREN_RUNNER_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef WARREN_RUN_VERSION
#define WARREN_RUN_VERSION "dev"
#endif

// Bounds on everything the host sends (the host checks them too).
enum {
  kMaxCommand = 1024 * 1024,
  kMaxCwd = 4096,
  kMaxEnvEntry = 128 * 1024,
  kMaxEnvCount = 256,
  kMaxHeader = 4 * 1024 * 1024,
  kFrameData = 32 * 1024,    // largest data frame payload the runner sends
  kListCommandBytes = 256,   // command bytes kept in a listing line
  kKeptCommandBytes = 4096,  // command bytes kept in the job directory
  kMaxListedJobs = 4096,
  kMaxScannedJobs = 1 << 20,    // job directories looked at by `list`
  kMaxListBytes = 1024 * 1024,  // `list` output (the host accepts 2 MiB)
  kKeepFinishedSeconds = 24 * 60 * 60,
};

// Exit statuses of the runner itself (not of the job).
enum {
  kExitOk = 0,
  kExitInternal = 1,
  kExitInvalid = 2,
  kExitNotFound = 3,
  kExitExists = 4,
  kExitNotRoot = 5,  // identity: run without root
};

// ---- header.c: the start header the host writes on stdin ----

struct env_entry {
  char* name;   // NUL-terminated, [A-Za-z_][A-Za-z0-9_]*
  char* value;  // NUL-terminated (NUL bytes are refused)
};

struct start_header {
  char* command;  // NUL-terminated
  size_t command_len;
  char* cwd;  // NUL-terminated; empty: $HOME
  struct env_entry env[kMaxEnvCount];
  int env_count;
  bool has_stdin;
  bool complete;  // the "end" record was seen
};

// Parses records from buf[*pos..len). Returns 1 when the header is complete (*pos is then
// just past it: what follows is the job's stdin), 0 when more bytes are needed, -1 on a
// malformed header (message in err). Records already parsed are not parsed again.
int header_parse(struct start_header* h, const char* buf, size_t len, size_t* pos, char* err,
                 size_t err_len);
void header_free(struct start_header* h);
bool valid_env_name(const char* name);
bool valid_job_id(const char* id);

// ---- frames (attach.c writes them) ----

enum {
  kFrameStarted = 'S',  // payload: the job id; the job runs (start only)
  kFrameStdout = 'o',
  kFrameStderr = 'e',
  kFrameCaughtUp = 'c',  // no payload: everything spooled so far was sent, the job runs on
  kFrameEnd = 'x',       // payload: "exit N" | "signal N" | "lost"; the last frame
  kFrameError = 'E',     // payload: "notfound|invalid|exists|full|internal MESSAGE"; the last frame
};
// Writes the 5-byte frame head (type, big-endian u32 length) into out.
void frame_head(char out[5], char type, uint32_t len);

// ---- jobdir.c: the job directory ~/.warren/jobs/ID ----

enum job_state { kJobRunning, kJobExited, kJobSignaled, kJobLost };

struct job_info {
  enum job_state state;
  int code;  // exit status or signal number
  int64_t started_at;
  int64_t ended_at;
};

// $HOME/.warren/jobs (created 0700 on demand when create is set). Returns false on error.
bool jobs_root(char* out, size_t len, bool create);
bool job_dir(const char* id, char* out, size_t len);
// Reads a small file into buf (NUL-terminated, at most len-1 bytes). Returns bytes or -1.
ssize_t read_small(const char* dir, const char* name, char* buf, size_t len);
// Writes a small file atomically (temp file + rename) so a reader never sees half of it.
bool write_atomic(const char* dir, const char* name, const char* data, size_t len);
// The current boot's id (/proc/sys/kernel/random/boot_id), "" when unknown.
void current_boot_id(char* out, size_t len);
// This process's start time in clock ticks since boot (/proc/PID/stat field 22), 0 if unknown.
unsigned long long process_start_time(pid_t pid);
// Where the job stands. Returns false when the directory is not a job.
bool job_status(const char* dir, struct job_info* info);
// Only whether it ended with a status (one file read): true and `info` filled if it did.
bool job_finished(const char* dir, struct job_info* info);

// ---- attach.c ----

// Streams the job's output from the offsets as frames on stdout until it ends (then an End
// frame) or the host goes away. stdin_src/stdin_dst >= 0: forwards bytes from stdin_src
// (after `pending` bytes already read) to the job's stdin pipe, closing it at EOF.
int attach_loop(const char* id, uint64_t out_from, uint64_t err_from, int stdin_src, int stdin_dst,
                const char* pending, size_t pending_len, bool send_started);
// Sends one Error frame (and nothing else) on stdout, best effort.
void send_error(const char* kind, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// The Error kind for a failed file-system call: "full" when the guest's disk (or the user's
// quota) is full, which the host reports as such, else "internal".
const char* errno_kind(int e);

// ---- warren-run.c ----

// `start ID`: reads the start header on stdin, starts the job and streams it as frames on
// stdout until it ends or the host goes away. Returns the exit status.
int cmd_start(const char* id);

// ---- serve.c: `serve`, the runner that stays (commands without an sshd session) ----

// Starts the server on $HOME/.warren/run/serve.sock in place of an earlier one, prints
// `serve PATH` and returns 0; kExitInternal with a reason on stderr when it cannot.
int cmd_serve(void);
// True, with the socket's path in `sock`, when the server of the user whose runner this
// binary is (~/.warren/bin/warren-run: ~/.warren/run) runs on this boot; the path is plain
// (letters, digits, "/._-") and fits a unix socket address. For `identity`'s report, run
// as root in a VM restored from a template, whose server came with the template's memory.
bool serve_running(char* sock, size_t len);

// ---- seed.c: the seed disk applied (`apply-seed`, at every boot and inside `identity`) ----

// Gives this VM the identity its seed disk carries, by the rules at the top of seed.c:
// restored for a VM restored from a template (`identity`); device names the seed's block
// device, NULL searches for the ext4 file system labelled warren-seed. Progress lines
// ("warren: ...") go to say_fd, nowhere when it is -1 (identity's stdout is its protocol).
// Returns kExitOk, or kExitInternal with a one-line reason in why (never a file's contents).
int apply_seed(bool restored, const char* device, int say_fd, char* why, size_t why_len);
// What a hand-out from the warm pool changes (identity.c): the host key pair when given
// (host_key_len 0: the VM keeps its own), written as apply-seed writes a seed's, and the
// hostname (kernel, /etc/hostname, /etc/hosts). The rest of the identity the VM took when it
// was pooled. kExitOk, or the reason in why.
int apply_handout(const char* hostname, const char* host_key, size_t host_key_len,
                  const char* host_key_pub, size_t host_key_pub_len, char* why, size_t why_len);
// `apply-seed [--restored]` (argv: what follows the verb): progress on stdout, a failure's
// reason on stderr, WARREN_SEED_DEVICE as the device with --restored. The exit status.
int cmd_apply_seed(int argc, char** argv);

// ---- identity.c: `identity`, run as root in a VM restored from a template ----

// Reads the request on stdin, applies the clone's identity, asks the host for the time and
// prints the report (the protocol is at the top of identity.c). Returns the exit status.
int cmd_identity(void);
// `warren-run VERB: REASON` on stderr, the reason on one line (at most 511 bytes); returns
// `code`. Shared by identity's verbs.
int verb_failure(const char* verb, int code, const char* fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

// ---- identity_wait.c: a root `identity` made ready in templates and pooled VMs ----

// `identity-wait`, as root through sudo: leaves a detached root process waiting on
// /run/warren/identity.sock for one `identity` run by the VM user, then exits 0.
int cmd_identity_wait(void);
// `identity` without root: hands stdin, stdout and stderr to the waiting process and returns
// the status it ran with; -1 when none waits.
int identity_hand_over(void);

#endif  // WARREN_RUNNER_H_
