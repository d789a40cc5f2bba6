# Backups and upgrades (issue 17).
# backup: 200 `ssh-key add` on 8 threads while `warren backup` (the CLI, beside serve) and the
# admin command `backup` (over SSH) each take one; both restored into fresh data dirs and
# checked (users, keys, a token on /exec, the host key, VM records made by crash_world over
# the fake host). No libvirt.
add_test(NAME backup
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_backup.py)
set_tests_properties(backup PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;CRASH_WORLD=$<TARGET_FILE:crash_world>;LANG=C.UTF-8"
  TIMEOUT 300
  LABELS "integration;ssh")

# vm_upgrade: a data dir of the previous release (b0ccd69) with a running VM and job, opened
# by this build. It needs that release's warren (with its warren-run beside it), which costs
# a second build of the binary: registered only when WARREN_PREV_BIN names it at configure
# time (see tests/integration/test_upgrade.py for how to build it).
if(DEFINED ENV{WARREN_PREV_BIN})
  add_test(NAME vm_upgrade
           COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_upgrade.py)
  set_tests_properties(vm_upgrade PROPERTIES
    ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;WARREN_PREV_BIN=$ENV{WARREN_PREV_BIN};LANG=C.UTF-8"
    TIMEOUT 900
    RESOURCE_LOCK guests_b
    LABELS "integration;vm")
endif()
