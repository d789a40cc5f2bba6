# The fake VmHost lives here, in tests, never in the product.
add_library(warren_test_fakes STATIC fakes/fake_vm_host.cc)
target_link_libraries(warren_test_fakes PUBLIC warren_vmhost)

# Unit tests always run; the real-QEMU cases inside skip (saying why) unless
# WARREN_TEST_IMAGES names a directory with the tiny image and libvirtd can be reached.
add_executable(vmhost_test
  unit/vm_host_contract_test.cc
  unit/domain_xml_test.cc
  unit/libvirt_host_test.cc)
target_compile_definitions(vmhost_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(vmhost_test PRIVATE warren_test_fakes GTest::gtest_main)
gtest_discover_tests(vmhost_test DISCOVERY_MODE PRE_TEST PROPERTIES RUN_SERIAL TRUE)
