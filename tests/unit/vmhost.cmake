# The fake VmHost lives here, in tests, never in the product.
add_library(warren_test_fakes STATIC fakes/fake_vm_host.cc)
target_link_libraries(warren_test_fakes PUBLIC warren_vmhost)

# Finds (or starts) libvirtd, the tiny image and a data dir for the real-QEMU tests.
add_library(warren_test_libvirt_env STATIC fakes/libvirt_test_env.cc)
target_link_libraries(warren_test_libvirt_env PUBLIC warren_libvirt GTest::gtest)

# Unit tests always run; the real-QEMU cases inside skip (saying why; under CI they fail)
# unless a tiny image is found (WARREN_TEST_IMAGES, default /var/lib/warren-test/images) and
# libvirtd answers or can be started. Serial: real guests share 2 cores.
add_executable(vmhost_test
  unit/vm_host_contract_test.cc
  unit/domain_xml_test.cc
  unit/libvirt_host_test.cc)
target_compile_definitions(vmhost_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(vmhost_test PRIVATE warren_test_fakes warren_test_libvirt_env GTest::gtest_main)
gtest_discover_tests(vmhost_test DISCOVERY_MODE PRE_TEST PROPERTIES RUN_SERIAL TRUE)
