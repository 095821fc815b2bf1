// A caller's CA bundle (--ca-bundle) joins the host's trust store in the sandbox's own file,
// whatever its size up to the cap: the sandbox's root has room for the largest whole bundle.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "smolbox_runner.h"
#include "test_support.h"
#include "trust_store.h"

namespace smolbox::testing {
namespace {

TEST(CaBundle, a_bundle_near_its_cap_joins_the_hosts_store_in_the_sandbox) {
  constexpr const char* kHostBundle = "/etc/ssl/certs/ca-certificates.crt";
  if (access(kHostBundle, R_OK) != 0) GTEST_SKIP() << "this host has no " << kHostBundle;
  TempDir dir("ca-bundle");
  ProgramRun made = RunProgram({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=bundle test CA",
                                "-keyout", dir.path() + "/key.pem", "-out", dir.path() + "/ca.pem"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // The one certificate, again and again, to just below the cap.
  const std::string pem = ReadFileOrEmpty(dir.path() + "/ca.pem");
  ASSERT_FALSE(pem.empty());
  std::string bundle;
  while (bundle.size() + pem.size() <= kMaxCaBundleBytes) bundle += pem;
  ASSERT_GT(bundle.size(), kMaxCaBundleBytes - pem.size());
  WriteFile(dir.path() + "/bundle.pem", bundle);

  auto run = RunJson({"--ca-bundle", dir.path() + "/bundle.pem"},
                     {"/usr/bin/python3", "-c",
                      "import os, ssl\n"
                      "print(os.path.getsize(os.environ['SSL_CERT_FILE']))\n"
                      "print(ssl.create_default_context().cert_store_stats()['x509_ca'] > 1)"});
  const std::string host = ReadFileOrEmpty(kHostBundle);
  ASSERT_EQ(run.result.value("status", ""), "exited") << run.out << run.err;
  EXPECT_EQ(run.result.value("stdout", ""), std::to_string(host.size() + bundle.size()) + "\nTrue\n") << run.out;
}

}  // namespace
}  // namespace smolbox::testing
