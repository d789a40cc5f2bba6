# `warren serve`'s command line and config file (lobby/serve_flags.*, lobby/serve_config.*):
# every flag settable from the file, precedence, the errors naming key and line, and the
# example config packaging/warren.conf kept equal to what the flags generate.
add_executable(serve_config_test unit/serve_config_test.cc ../lobby/serve_flags.cc
  ../lobby/serve_config.cc)
target_link_libraries(serve_config_test PRIVATE
  warren_ssh warren_web warren_bridge warren_mcp warren_oauth warren_commands warren_keys
  warren_base CLI11::CLI11 GTest::gtest_main)
target_compile_definitions(serve_config_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  WARREN_BINARY_DIR="${CMAKE_BINARY_DIR}")
gtest_discover_tests(serve_config_test DISCOVERY_MODE PRE_TEST)

# serve's host flags (lobby/host_flags.*): --host, --host-isolated and --host-peer-uri checked.
add_executable(host_flags_test unit/host_flags_test.cc ../lobby/host_flags.cc)
target_link_libraries(host_flags_test PRIVATE warren_libvirt warren_vmhost warren_base
  GTest::gtest_main)
gtest_discover_tests(host_flags_test DISCOVERY_MODE PRE_TEST)
