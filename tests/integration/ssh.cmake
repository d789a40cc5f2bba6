# Loopback integration tests of the SSH lobby: each starts the real `warren serve` on
# 127.0.0.1 port 0 in a temp dir and drives it with OpenSSH, paramiko and expect
# (openssh-client, python3-paramiko, expect). Each cleans up its processes and files.
function(warren_ssh_test name script)
  add_test(NAME ${name}
           COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/${script})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
    TIMEOUT 120
    LABELS "integration;ssh")
endfunction()

warren_ssh_test(ssh_lobby test_ssh_lobby.py)
warren_ssh_test(ssh_auth test_ssh_auth.py)
warren_ssh_test(ssh_channels test_ssh_channels.py)
warren_ssh_test(ssh_repl test_repl.py)
warren_ssh_test(ssh_flood test_ssh_flood.py)
warren_ssh_test(http_health test_http_health.py)
warren_ssh_test(ssh_integrations test_integrations.py)

# VMs end to end on real libvirt + QEMU through the lobby. Every test that boots guests holds
# a guest lane, `guests_a` or `guests_b` (tests/CMakeLists.txt says how they are chosen).
add_test(NAME vm_e2e
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_e2e.py)
set_tests_properties(vm_e2e PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1200
  RESOURCE_LOCK guests_a
  LABELS "integration;vm")

# ssh NAME@HOST straight into a VM (exec, pty shell, -L/-W, sftp/scp, limits) on one tiny VM.
add_test(NAME vm_route
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_route.py)
set_tests_properties(vm_route PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_a
  LABELS "integration;vm")

# Host isolation and egress policies (nftables on QEMU's user): a tiny and a debian guest
# against the host's loopback and interface addresses, each other, and an "outside" netns.
add_test(NAME vm_isolation
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_isolation.py)
set_tests_properties(vm_isolation PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1500
  RESOURCE_LOCK "guests_a;guests_b"
  LABELS "integration;vm")

# cp, resize and rename of running VMs end to end (fork, independence, faults, SIGKILL).
add_test(NAME vm_copy
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_copy.py)
set_tests_properties(vm_copy PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm")

# cp --live (tiny): a server started by hand in the source answers in the copy, which never
# booted and has its own hostname, host key and MAC; writes do not cross; made=live-copy; a
# stopped source is copied by its disk. Prints cp --live's time against a plain cp's.
add_test(NAME vm_live_copy
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_live_copy.py)
set_tests_properties(vm_live_copy PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm")

# A busy VM (busy loops on every vCPU) leaves the lobby and another VM responsive: <cputune>.
add_test(NAME vm_cpu_share
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_cpu_share.py)
set_tests_properties(vm_cpu_share PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 600
  RESOURCE_LOCK guests_b
  LABELS "integration;vm")

# Integrations end to end: the proxy through the guest endpoint of a debian and tiny guests
# (header, bearer, https, 50 MiB, uploads, tags, detach mid-stream, other VMs' names, the
# secret nowhere), and the egress policies against them, with a loopback upstream.
add_test(NAME vm_integrations
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_integrations.py)
set_tests_properties(vm_integrations PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1800
  RESOURCE_LOCK guests_a
  LABELS "integration;vm;integrations")

# Every VM on the web: sign-in, host-bound sessions, bearer tokens, sharing (users, links,
# public), owner-only ports, what never reaches the VM, 502/503, 200 MiB, SSE, WebSockets,
# 200 concurrent visitors across 5 VMs, rename and URLs — over plain HTTP to `--web`.
add_test(NAME vm_web
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_web.py)
set_tests_properties(vm_web PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1800
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;web")

# A VM's page in headless Chromium through the web proxy: the magic link, the owner's page
# (DOM and screenshot), a second profile's sign-in page, public/private, a share link, and
# the page's own WebSocket to an echo in the VM.
add_test(NAME vm_web_browser
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_web_browser.py)
set_tests_properties(vm_web_browser PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1200
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;web;browser")

# Sandboxes on real guests: seed 002 over SSH and /exec, the host's room, expiry (also while
# warren was down), usage against the wall clock, tag scope, and 20 at once then the 21st.
add_test(NAME vm_sandboxes
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_sandboxes.py)
set_tests_properties(vm_sandboxes PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1800
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;sandbox")

# `new` restored from a saved template (tiny): two clones differ in hostname, host key, MAC and
# random numbers, their clocks agree with the host's, a restart keeps the identity, and a
# damaged template is removed and `new` boots instead.
add_test(NAME vm_templates
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_templates.py)
set_tests_properties(vm_templates PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;templates")

# Crash points on real guests (issue 16): warren SIGKILLed at 10 seeded moments of new, cp,
# cp --live, rm, stop, start, restart, resize, rename and egress on tiny (templates on),
# restarted, and checked with virsh, DATA/{vms,disks,tmp,templates} and ls --json: nothing
# orphaned, store and host agreeing, the cut command wholly there or not at all. About a
# minute; WARREN_CRASH_SEED replays, WARREN_CRASH_ROUNDS=N runs N times the points. The fake
# host's 100 points are CTest crash_points (tests/crash).
add_test(NAME vm_crash_points
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_crash_points.py)
set_tests_properties(vm_crash_points PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_a
  LABELS "integration;vm;crash")

# The warm pool (tiny): paused, connected VMs no user sees; `new` takes one that is its own
# (identity, clock, restart) and the pool refills; SIGKILL while handing out and while
# refilling leaves no domain, directory, disk or FIFO behind and the pool back to size.
add_test(NAME vm_pool
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_vm_pool.py)
set_tests_properties(vm_pool PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 1200
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;templates")

# libvirtd restarts (issue 16): a libvirtd of the test's own, in a private mount namespace
# (never the machine's shared daemon), SIGKILLed while a tiny VM idles (warren restarts the
# daemon it started, reconnects, reconciles), twice in the middle of `new` (the VM there
# wholly or not at all, nothing orphaned, a retry works), and one warren did not start
# (warren waits, VM commands answer "VM host unavailable ... reconnecting" at once).
add_test(NAME vm_libvirtd_restart
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_libvirtd_restart.py)
set_tests_properties(vm_libvirtd_restart PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 600
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;libvirtd")

# A hostile guest (issue 16, tiny): mallory's VM root floods the control port with garbage,
# sends malformed runner frames, stops reading, kills its sshd in a loop, fills its disk,
# fork-bombs, writes 16 MiB and leaves 16 channels unread, while alice's lobby ls latency
# (p50/p99 against a baseline), her VM command and warren's RSS are measured; each condition
# must be reported clearly and mallory's VM must come back. About 5 minutes;
# WARREN_HOSTILE_LONG=1 streams 1 GiB (manual, ~30 min).
add_test(NAME vm_hostile_guest
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_hostile_guest.py)
set_tests_properties(vm_hostile_guest PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_a
  LABELS "integration;vm")
