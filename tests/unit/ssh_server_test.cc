// The SSH lobby's server end to end in one process, its threads included: SshServer's
// listener, one SshConnection thread per client, the command workers and their ChannelIo
// hand-off, the real Interpreter over a real LmdbStore, driven by OpenSSH's `ssh` client.
// Small and fast, so that tests/sanitizers/run.sh can run it under ASan and TSan; the
// protocol's corners are tests/integration/test_ssh_*.py's, against `warren serve`.
#include "lobby/ssh/ssh_server.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "keys/lmdb_store.h"
#include "keys/public_key.h"
#include "lobby/base/clock.h"
#include "lobby/commands/interpreter.h"
#include "tests/unit/skip_or_fail.h"

namespace warren::ssh {
namespace {

struct Ran {
  int exit_status = -1;
  std::string out;
};

// Runs `command` through the shell and returns its exit status and stdout.
Ran Shell(const std::string& command) {
  Ran r;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class SshServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Shell("command -v ssh ssh-keygen >/dev/null 2>&1").exit_status != 0) {
      WARREN_SKIP_OR_FAIL() << "needs OpenSSH's ssh and ssh-keygen (openssh-client)";
    }
    char tmpl[] = "/tmp/warren-ssh-server-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* user : {"alice", "bob"}) {
      const std::string key = dir_ + "/" + user;
      ASSERT_EQ(Shell("ssh-keygen -q -t ed25519 -N '' -C " + std::string(user) + " -f " + key)
                    .exit_status,
                0);
    }
    auto opened = LmdbStore::Open(dir_ + "/store");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(store_->CreateUser({"alice", true, clock_.NowUnix()}, {Key("alice")}).ok());
    ASSERT_TRUE(store_->CreateUser({"bob", false, clock_.NowUnix()}, {Key("bob")}).ok());

    Services services;
    services.store = store_.get();
    services.clock = &clock_;
    services.info.ssh_host = "127.0.0.1";
    interpreter_ = std::make_unique<Interpreter>(services);
    SshServerOptions options;
    options.port = 0;
    options.data_dir = dir_;
    options.on_listening = [this](int port) { interpreter_->services().info.ssh_port = port; };
    server_ = std::make_unique<SshServer>(options, *interpreter_, *store_, clock_);
    ASSERT_TRUE(server_->Start().ok());
  }

  void TearDown() override {
    if (server_) {
      EXPECT_TRUE(server_->Stop());
    }
    server_.reset();
    interpreter_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  SshKey Key(const std::string& user) {
    PublicKey pk = ParseAuthorizedKey(ReadFile(dir_ + "/" + user + ".pub")).value();
    SshKey k;
    k.fingerprint = pk.fingerprint;
    k.user = user;
    k.name = "laptop";
    k.algorithm = pk.algorithm;
    k.blob_base64 = pk.blob_base64;
    k.comment = pk.comment;
    k.added_at = clock_.NowUnix();
    return k;
  }

  // `ssh -i DIR/KEY -p PORT OPTIONS USER@127.0.0.1 REMOTE`, its stderr into the test's log.
  std::string Ssh(const std::string& user, const std::string& key, const std::string& options,
                  const std::string& remote) {
    return "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o LogLevel=ERROR"
           " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -i " +
           dir_ + "/" + key + " -p " + std::to_string(server_->port()) + " " + options + " " +
           user + "@127.0.0.1 " + remote;
  }

  std::string dir_;
  SystemClock clock_;
  std::unique_ptr<LmdbStore> store_;
  std::unique_ptr<Interpreter> interpreter_;
  std::unique_ptr<SshServer> server_;
};

TEST_F(SshServerTest, ConcurrentClientsEachGetTheirOwnAnswers) {
  constexpr int kClients = 6;
  std::vector<Ran> ran(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const std::string user = i % 2 == 0 ? "alice" : "bob";
      ran[i] = Shell(Ssh(user, user, "", "whoami --json"));
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(ran[i].exit_status, 0) << i;
    const std::string user = i % 2 == 0 ? "alice" : "bob";
    nlohmann::json j = nlohmann::json::parse(ran[i].out, nullptr, /*allow_exceptions=*/false);
    EXPECT_EQ(j.is_object() ? j.value("user", "") : "", user) << i << ": " << ran[i].out;
  }
}

TEST_F(SshServerTest, StdinReachesTheCommandAndItsChangeIsStored) {
  // ssh-key add reads the key line from stdin: the channel's data goes through ChannelIo to
  // the worker, and the worker's answer and exit status come back.
  ASSERT_EQ(Shell("ssh-keygen -q -t ed25519 -N '' -C spare -f " + dir_ + "/spare").exit_status, 0);
  Ran added =
      Shell(Ssh("bob", "bob", "", "ssh-key add --name spare") + " < " + dir_ + "/spare.pub");
  EXPECT_EQ(added.exit_status, 0) << added.out;
  Result<std::vector<SshKey>> keys = store_->ListKeys("bob");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 2u);
  // The new key logs in as bob.
  Ran who = Shell(Ssh("bob", "spare", "", "whoami"));
  EXPECT_EQ(who.exit_status, 0);
  EXPECT_NE(who.out.find("bob"), std::string::npos) << who.out;
}

TEST_F(SshServerTest, AFailingCommandsExitStatusReachesTheClient) {
  // bob is no admin: `user ls` is refused with permission_denied's exit status (4).
  Ran refused = Shell(Ssh("bob", "bob", "", "user ls"));
  EXPECT_EQ(refused.exit_status, 4) << refused.out;
  Ran unknown = Shell(Ssh("alice", "alice", "", "no-such-command"));
  EXPECT_NE(unknown.exit_status, 0);
}

TEST_F(SshServerTest, StopDisconnectsAnOpenConnection) {
  // A REPL held open by a client that sends nothing: Stop() cancels it, closes the
  // connection and joins every thread; the client sees the end.
  const std::string fifo = dir_ + "/stdin";
  ASSERT_EQ(Shell("mkfifo " + fifo).exit_status, 0);
  std::thread client(
      [&] { Shell(Ssh("alice", "alice", "-tt", "") + " < " + fifo + " > /dev/null"); });
  // Holds the fifo's write end open, so the client's stdin stays silent but not at EOF.
  std::ofstream writer(fifo);
  for (int i = 0; i < 100 && server_->open_connections() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(server_->open_connections(), 1);
  EXPECT_TRUE(server_->Stop());
  EXPECT_EQ(server_->open_connections(), 0);
  writer.close();
  client.join();
}

}  // namespace
}  // namespace warren::ssh
