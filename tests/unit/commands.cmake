# The command interpreter: tokenizer, dispatch (interpreter_test) and the built-in commands
# (a cmd_*_test per cmd_*.cc; lobby_test_fixture.h and vm_test_fixture.h), against a real
# LmdbStore in a temp dir; the VM commands and reconcile against FakeVmHost and
# FakeGuestControl.
add_library(warren_test_guest_fake STATIC fakes/fake_guest_control.cc)
target_link_libraries(warren_test_guest_fake PUBLIC warren_vmhost)

add_executable(commands_test
  unit/tokenizer_test.cc
  unit/vm_quota_test.cc
  unit/interpreter_test.cc
  unit/cmd_authorize_test.cc
  unit/cmd_help_test.cc
  unit/cmd_ssh_key_test.cc
  unit/cmd_user_test.cc
  unit/cmd_whoami_test.cc
  unit/vm_commands_test.cc
  unit/cmd_new_test.cc
  unit/vm_access_test.cc
  unit/cmd_vm_list_test.cc
  unit/cmd_vm_state_test.cc
  unit/cmd_vm_meta_test.cc
  unit/cmd_vm_copy_test.cc
  unit/cmd_vm_resize_test.cc
  unit/cmd_egress_test.cc
  unit/cmd_vm_ssh_test.cc
  unit/cmd_jobs_test.cc
  unit/cmd_integrations_test.cc
  unit/cmd_share_test.cc
  unit/cmd_browser_test.cc
  unit/web_access_test.cc
  unit/head_tail_test.cc
  unit/reconcile_test.cc
  unit/vm_login_test.cc
  unit/command_runner_test.cc
  unit/live_sessions_test.cc
  unit/sandbox_test.cc
  unit/cmd_sandbox_test.cc
  unit/cmd_usage_test.cc
  unit/cmd_hosts_test.cc
  unit/cmd_migrate_test.cc
  unit/sandbox_view_test.cc
  unit/vm_pool_test.cc
  ../lobby/vm_pool.cc)
target_link_libraries(commands_test PRIVATE
  warren_commands warren_keys warren_test_fakes warren_test_guest_fake GTest::gtest_main)
gtest_discover_tests(commands_test DISCOVERY_MODE PRE_TEST)
