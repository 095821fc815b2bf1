// Reports: report.json counts, junit.xml structure and escaping, report.md tables, the terminal
// table, and the files written.
#include "battery/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_support.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

BatteryReport Sample() {
  BatteryReport r;
  r.sandbox = "bwrap";
  r.sandbox_version = "bubblewrap 0.8.0";
  r.host = {{"kernel", "Linux 6.1.0"}, {"cpus", 2}, {"memory_mib", 4096}, {"uid", 0}};
  r.started = "2025-01-02T03:04:05Z";
  r.cases = {
      {"cpu.loop.python", "cpu", "adversarial", Verdict::kPass, "", "timeout", 2100, {}, ""},
      {"cpu.loop.js",
       "cpu",
       "adversarial",
       Verdict::kFail,
       "status exited, expected timeout | \"quoted\" <b>&amp;\nsecond line\x01",
       "exited",
       1500,
       {"cpus"},
       ""},
      {"network.tcp.python",
       "network",
       "adversarial",
       Verdict::kError,
       "setup: no netns",
       "",
       0,
       {},
       ""},
      {"memory.grow.js",
       "memory",
       "adversarial",
       Verdict::kSkip,
       "syntax only",
       "",
       0,
       {"memory_mib", "pids"},
       ""},
      {"functional.hello.python",
       "functional",
       "functional",
       Verdict::kPass,
       "",
       "exited",
       40,
       {"memory_mib"},
       ""},
  };
  return r;
}

// ---------------------------------------------------------------------------
// report.json

TEST(ToJson, counts_every_verdict_overall_and_by_category) {
  json j = ToJson(Sample());
  const json& s = j["summary"];
  EXPECT_EQ(s["total"], 5);
  EXPECT_EQ(s["pass"], 2);
  EXPECT_EQ(s["fail"], 1);
  EXPECT_EQ(s["error"], 1);
  EXPECT_EQ(s["skip"], 1);
  EXPECT_EQ(s["by_category"]["cpu"], (json{{"pass", 1}, {"fail", 1}, {"error", 0}, {"skip", 0}}));
  EXPECT_EQ(s["by_category"]["network"]["error"], 1);
  EXPECT_EQ(s["by_category"]["memory"]["skip"], 1);
  EXPECT_EQ(s["by_category"].size(), 4u);
}

TEST(ToJson, carries_the_run_and_every_field_of_each_case) {
  json j = ToJson(Sample());
  EXPECT_EQ(j["sandbox"], "bwrap");
  EXPECT_EQ(j["sandbox_version"], "bubblewrap 0.8.0");
  EXPECT_EQ(j["started"], "2025-01-02T03:04:05Z");
  EXPECT_EQ(j["startup_allowance_ms"], 0);
  EXPECT_EQ(j["host"]["cpus"], 2);
  ASSERT_EQ(j["cases"].size(), 5u);
  const json& c = j["cases"][1];
  EXPECT_EQ(c["id"], "cpu.loop.js");
  EXPECT_EQ(c["category"], "cpu");
  EXPECT_EQ(c["kind"], "adversarial");
  EXPECT_EQ(c["verdict"], "fail");
  EXPECT_EQ(c["status"], "exited");
  EXPECT_EQ(c["wall_ms"], 1500);
  EXPECT_EQ(c["unsupported_limits"], json::array({"cpus"}));
  EXPECT_EQ(j["cases"][0]["unsupported_limits"], json::array());
}

TEST(ToJson, survives_a_reason_that_is_not_utf8) {
  BatteryReport r = Sample();
  r.cases[0].reason = "payload printed \xff\xfe";
  std::string text = ToJson(r).dump();
  EXPECT_NE(text.find("payload printed"), std::string::npos);
}

// ---------------------------------------------------------------------------
// junit.xml

TEST(ToJunitXml, has_one_suite_per_category_with_its_counts) {
  std::string xml = ToJunitXml(Sample());
  EXPECT_TRUE(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites "));
  EXPECT_NE(xml.find(R"x(<testsuites name="smolvm-check bwrap (bubblewrap 0.8.0)" tests="5" )x"
                     R"(failures="1" errors="1" skipped="1" time="3.640">)"),
            std::string::npos)
      << xml;
  EXPECT_EQ(Count(xml, "<testsuite "), 4u);
  EXPECT_NE(xml.find(R"(<testsuite name="cpu" tests="2" failures="1" errors="0" skipped="0" )"
                     R"(time="3.600" timestamp="2025-01-02T03:04:05">)"),
            std::string::npos)
      << xml;
  EXPECT_EQ(Count(xml, "<testcase "), 5u);
  EXPECT_EQ(Count(xml, "</testsuite>"), 4u);
  EXPECT_TRUE(xml.ends_with("</testsuites>\n"));
}

TEST(ToJunitXml, marks_failures_errors_and_skips) {
  std::string xml = ToJunitXml(Sample());
  EXPECT_NE(xml.find(R"(<testcase classname="cpu" name="cpu.loop.python" time="2.100"/>)"),
            std::string::npos)
      << xml;
  EXPECT_EQ(Count(xml, "<failure "), 1u);
  EXPECT_NE(xml.find(R"(<testcase classname="network" name="network.tcp.python" time="0.000">)"
                     "\n      "
                     R"(<error message="setup: no netns" type=""/>)"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find(R"(<skipped message="syntax only"/>)"), std::string::npos) << xml;
}

TEST(ToJunitXml, escapes_quotes_markup_and_control_characters_in_attributes) {
  std::string xml = ToJunitXml(Sample());
  EXPECT_NE(xml.find(R"(<failure message="status exited, expected timeout | &quot;quoted&quot; )"
                     R"(&lt;b&gt;&amp;amp;&#10;second line\x01" type="exited"/>)"),
            std::string::npos)
      << xml;
  BatteryReport r = Sample();
  r.cases[0].id = "a'b\"c<d>&e";
  r.cases[0].category = "x\ty";
  xml = ToJunitXml(r);
  EXPECT_NE(xml.find(R"(classname="x&#9;y" name="a&apos;b&quot;c&lt;d&gt;&amp;e")"),
            std::string::npos)
      << xml;
  EXPECT_EQ(Count(xml, "\x01"), 0u);
}

// ---------------------------------------------------------------------------
// report.md

TEST(ToMarkdown, has_a_heading_a_summary_and_a_table_by_category) {
  std::string md = ToMarkdown(Sample());
  EXPECT_TRUE(md.starts_with("# smolvm-check: bwrap (bubblewrap 0.8.0), 2025-01-02\n")) << md;
  EXPECT_NE(md.find("**5 cases: 2 pass, 1 fail, 1 error, 1 skip.**"), std::string::npos) << md;
  EXPECT_NE(md.find("| category | pass | fail | error | skip |\n|---|---:|---:|---:|---:|\n"
                    "| cpu | 1 | 1 | 0 | 0 |\n| memory | 0 | 0 | 0 | 1 |\n"
                    "| network | 0 | 0 | 1 | 0 |\n| functional | 1 | 0 | 0 | 0 |\n"
                    "| **total** | 2 | 1 | 1 | 1 |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Linux 6.1.0, 2 CPUs, 4096 MiB"), std::string::npos) << md;
}

TEST(ToMarkdown, lists_failures_with_pipes_and_newlines_escaped) {
  std::string md = ToMarkdown(Sample());
  EXPECT_NE(md.find("## Failures\n\n| case | verdict | reason |\n|---|---|---|\n"),
            std::string::npos);
  EXPECT_NE(md.find("| `cpu.loop.js` | fail | status exited, expected timeout \\| \"quoted\" "
                    "&lt;b&gt;&amp;amp; second line  |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| `network.tcp.python` | error | setup: no netns |\n"), std::string::npos);
  EXPECT_EQ(md.find("cpu.loop.python`"), std::string::npos) << "a pass is not a failure";
}

TEST(ToMarkdown, lists_the_limits_the_sandbox_cannot_enforce) {
  std::string md = ToMarkdown(Sample());
  EXPECT_NE(md.find("## Unsupported limits"), std::string::npos) << md;
  EXPECT_NE(md.find("- `memory_mib`: 2 (memory.grow.js, functional.hello.python)\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- `cpus`: 1 (cpu.loop.js)\n"), std::string::npos) << md;
}

TEST(ToMarkdown, leaves_out_empty_sections) {
  BatteryReport r = Sample();
  r.cases = {r.cases[0]};
  std::string md = ToMarkdown(r);
  EXPECT_EQ(md.find("## Failures"), std::string::npos);
  EXPECT_EQ(md.find("## Unsupported"), std::string::npos);
}

// ---------------------------------------------------------------------------
// The terminal

TEST(PrintTable, aligns_the_categories_and_gives_every_failure_its_reason) {
  std::ostringstream out;
  PrintTable(Sample(), out, false);
  std::string text = out.str();
  EXPECT_TRUE(
      text.starts_with("category    pass  fail  error  skip\n"
                       "cpu            1     1      0     0\n"
                       "memory         0     0      0     1\n"
                       "network        0     0      1     0\n"
                       "functional     1     0      0     0\n"
                       "total          2     1      1     1\n"))
      << text;
  EXPECT_NE(text.find("Failures:\n  FAIL  cpu.loop.js: status exited, expected timeout | "
                      "\"quoted\" <b>&amp; second line \n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  ERROR network.tcp.python: setup: no netns\n"), std::string::npos) << text;
  EXPECT_NE(text.find("memory_mib (set by 2 cases)"), std::string::npos) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos);
}

TEST(PrintTable, paints_passes_green_and_failures_red_only_with_color) {
  std::ostringstream out;
  PrintTable(Sample(), out, true);
  std::string text = out.str();
  EXPECT_NE(text.find("\033[32m    1\033[0m"), std::string::npos) << text;
  EXPECT_NE(text.find("\033[31m    1\033[0m"), std::string::npos) << text;
  EXPECT_NE(text.find("\033[31mFAIL \033[0m cpu.loop.js"), std::string::npos) << text;
}

// ---------------------------------------------------------------------------
// Files and host

TEST(WriteReports, creates_the_directory_and_writes_the_three_reports) {
  smolbox::testing::TempDir root("report-test");
  std::string dir = root.path() + "/nested/reports";
  auto ok = WriteReports(Sample(), dir);
  ASSERT_TRUE(ok) << ok.error().ToString();
  std::ifstream in(dir + "/report.json");
  json j = json::parse(in);
  EXPECT_EQ(j["summary"]["total"], 5);
  EXPECT_TRUE(std::filesystem::exists(dir + "/junit.xml"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/report.md"));
}

TEST(WriteReports, names_the_path_it_cannot_create) {
  auto ok = WriteReports(Sample(), "/proc/self/no-such/reports");
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().ToString().find("/proc/self/no-such/reports"), std::string::npos)
      << ok.error().ToString();
}

TEST(DescribeHost, gives_the_kernel_cpus_memory_and_user) {
  json host = DescribeHost();
  EXPECT_TRUE(host["kernel"].get<std::string>().starts_with("Linux ")) << host.dump();
  EXPECT_GE(host["cpus"].get<int64_t>(), 1);
  EXPECT_GT(host["memory_mib"].get<int64_t>(), 0);
  EXPECT_EQ(host["uid"].get<int64_t>(), static_cast<int64_t>(getuid()));
  EXPECT_FALSE(host.contains("hostname"));
}

}  // namespace
}  // namespace smolvm_check
