# keys/: scopes, SSH public keys, API tokens, usage arithmetic, the LMDB store (real LMDB in
# temp directories).
add_executable(keys_test
  ${CMAKE_CURRENT_LIST_DIR}/scope_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/public_key_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/lmdb_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/vm_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/token_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/integration_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/web_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/usage_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/usage_store_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/backup_test.cc
)
# LMDB directly too: the schema tests write a store's meta table as a newer warren would.
target_link_libraries(keys_test PRIVATE warren_keys PkgConfig::LMDB GTest::gtest_main)
gtest_discover_tests(keys_test DISCOVERY_MODE PRE_TEST)
