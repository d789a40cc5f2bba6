# `warren serve` as operators run it (no VMs): the config file and --print-config, JSON logs,
# no secret in the log at debug through a real session, SIGHUP (TLS certificate, log level)
# and sd_notify on a NOTIFY_SOCKET the test binds.
add_test(NAME serve_config
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_serve_config.py)
set_tests_properties(serve_config PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 180
  LABELS "integration;http")
