// The storage behaves like a normal filesystem for ordinary programs (the vm backend's twin is
// in tests/vm/vm_test.cc).
#include <gtest/gtest.h>

#include "ordinary_files.h"
#include "smolbox_runner.h"

namespace smolbox::testing {
namespace {

TEST(NsStorage, mmap_fifos_sqlite_wal_and_multiprocessing_work_and_mknod_is_eperm_in_tmp_and_work) {
  auto run = RunJson({}, {"/usr/bin/python3", "-c", kOrdinaryFilesPython, "/tmp", "/work"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], kOrdinaryFilesExpected) << run.result["stderr"];
}

}  // namespace
}  // namespace smolbox::testing
