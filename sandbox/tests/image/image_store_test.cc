// The image store against crafted images: every attack an image tar can carry is refused (or
// defused) with a clear error, and leaves nothing in the store; the legitimate cases (whiteouts,
// opaque directories, compressed layers, shared layers, docker save tars) come out right.
#include "smolbox/image_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "image_builder.h"
#ifdef SMOLBOX_MUTANTS
#include "mutant.h"
#endif
#include "test_support.h"

namespace smolbox::testing {
namespace {

using image::ImageStore;
using image::ImportOptions;
using image::ImportResult;
using json = nlohmann::json;
namespace fs = std::filesystem;

ImportOptions Named(std::string name) {
  ImportOptions options;
  options.name = std::move(name);
  return options;
}

ImportOptions Bounded(int64_t max_bytes, int64_t max_files) {
  ImportOptions options;
  options.max_bytes = max_bytes;
  options.max_files = max_files;
  return options;
}

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = ImageStore::Open(dir_.path() + "/store");
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_.emplace(std::move(*opened));
  }

  Expected<ImportResult> ImportLayers(const std::vector<std::string>& layers, const ImportOptions& options = {},
                                      const json& config = Config({"PATH=/usr/bin"})) {
    OciLayout layout(Scratch());
    layout.AddImage(layers, config, "app:1");
    return store_->Import(layout.dir(), options);
  }

  std::string Scratch() { return fmt::format("{}/in{}", dir_.path(), scratch_count_++); }

  std::string RootfsOf(const ImportResult& result) { return store_->RootfsOf(result.images.at(0)); }

  static size_t Entries(const std::string& path) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(path)) ++n;
    return n;
  }

  // What a refused import must leave: no image, no blob, no staging, no tag.
  void ExpectNothingLeft() {
    const std::string& root = store_->root();
    EXPECT_EQ(Entries(root + "/images"), 0u);
    EXPECT_EQ(Entries(root + "/blobs/sha256"), 0u);
    EXPECT_EQ(Entries(root + "/tmp"), 0u);
    auto listed = store_->List();
    ASSERT_TRUE(listed);
    EXPECT_TRUE(listed->empty());
  }

  // Refused, with the reason in the error, and nothing left behind.
  void ExpectRefused(const Expected<ImportResult>& result, const std::string& reason) {
    ASSERT_FALSE(result) << "imported an image that must be refused";
    EXPECT_NE(result.error().ToString().find(reason), std::string::npos) << result.error().ToString();
    ExpectNothingLeft();
  }

  TempDir dir_{"image-store-test"};
  std::optional<ImageStore> store_;
  int scratch_count_ = 0;
};

TEST_F(ImageStoreTest, refuses_an_entry_that_climbs_out_with_dotdot) {
  ExpectRefused(ImportLayers({MakeTar({File("usr/../../escaped", "x")})}), "climbs out");
  EXPECT_FALSE(fs::exists(dir_.path() + "/store/escaped"));
}

TEST_F(ImageStoreTest, refuses_an_absolute_entry) {
  ExpectRefused(ImportLayers({MakeTar({File(dir_.path() + "/absolute", "x")})}), "is an absolute path");
  EXPECT_FALSE(fs::exists(dir_.path() + "/absolute"));
}

TEST_F(ImageStoreTest, refuses_a_path_through_a_symlink_an_earlier_entry_planted) {
  fs::create_directory(dir_.path() + "/outside");
  ExpectRefused(ImportLayers({MakeTar({Symlink("etc", dir_.path() + "/outside"), File("etc/x", "planted")})}),
                "goes through the symlink etc");
  EXPECT_TRUE(fs::is_empty(dir_.path() + "/outside"));
}

TEST_F(ImageStoreTest, refuses_a_path_through_a_symlink_a_lower_layer_planted) {
  fs::create_directory(dir_.path() + "/outside");
  std::string lower = MakeTar({Dir("usr"), Symlink("usr/lib", "../../../outside")});
  std::string upper = MakeTar({File("usr/lib/x", "planted")});
  ExpectRefused(ImportLayers({lower, upper}), "goes through the symlink usr/lib");
  EXPECT_TRUE(fs::is_empty(dir_.path() + "/outside"));
}

// A link that stays in the tree is no more to be written through: the entry lands where its
// own path says, or not at all.
TEST_F(ImageStoreTest, refuses_a_path_through_a_symlink_that_stays_inside_the_tree) {
  std::string lower = MakeTar({Dir("usr"), Dir("opt"), Symlink("usr/lib", "../opt")});
  std::string upper = MakeTar({File("usr/lib/x", "through the link")});
  ExpectRefused(ImportLayers({lower, upper}), "goes through the symlink usr/lib");
}

TEST_F(ImageStoreTest, refuses_hardlinks_to_outside_the_layer) {
  WriteFile(dir_.path() + "/secret", "host secret");
  ExpectRefused(ImportLayers({MakeTar({Hardlink("x", "../../secret")})}), "outside the image");
  ExpectRefused(ImportLayers({MakeTar({Hardlink("x", dir_.path() + "/secret")})}), "outside the image");
  ExpectRefused(ImportLayers({MakeTar({Symlink("d", dir_.path()), Hardlink("x", "d/secret")})}), "does not hold");
}

TEST_F(ImageStoreTest, refuses_a_whiteout_that_climbs_out) {
  WriteFile(dir_.path() + "/victim", "keep me");
  ExpectRefused(ImportLayers({MakeTar({File("a/x", "x")}), MakeTar({File("a/.wh..", "")})}), "names no entry");
  ExpectRefused(ImportLayers({MakeTar({File("a/x", "x")}), MakeTar({File("a/../../../.wh.victim", "")})}), "climbs out");
  EXPECT_TRUE(fs::exists(dir_.path() + "/victim"));
}

TEST_F(ImageStoreTest, drops_device_nodes_and_fifos_with_a_warning) {
  auto result = ImportLayers({MakeTar({Special("dev/null", 'c'), Special("fifo", 'p'), File("ok", "ok")})});
  ASSERT_TRUE(result) << result.error().ToString();
  EXPECT_FALSE(fs::exists(fs::symlink_status(RootfsOf(*result) + "/dev/null")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(RootfsOf(*result) + "/fifo")));
  EXPECT_EQ(ReadFileOrEmpty(RootfsOf(*result) + "/ok"), "ok");
  ASSERT_EQ(result->warnings.size(), 1u);
  EXPECT_NE(result->warnings[0].find("dropped 2 device node(s), FIFO(s) or socket(s)"), std::string::npos) << result->warnings[0];
}

TEST_F(ImageStoreTest, strips_setuid_and_setgid_bits_with_a_warning) {
  auto result = ImportLayers({MakeTar({File("bin/su", "x", 04755), File("bin/wall", "x", 02755), Dir("shared", 02775)})});
  ASSERT_TRUE(result) << result.error().ToString();
  struct stat st {};
  ASSERT_EQ(stat((RootfsOf(*result) + "/bin/su").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat((RootfsOf(*result) + "/bin/wall").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat((RootfsOf(*result) + "/shared").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07000, 0u);
  ASSERT_EQ(result->warnings.size(), 1u);
  EXPECT_NE(result->warnings[0].find("stripped the setuid or setgid bit of 3 file(s)"), std::string::npos);
}

TEST_F(ImageStoreTest, refuses_a_decompression_bomb_over_the_size_limit) {
  // 64 MiB of zeros gzip to about 64 KiB.
  std::string bomb = MakeTar({File("zeros", std::string(64 << 20, '\0'))}, Compression::kGzip);
  ASSERT_LT(bomb.size(), 1u << 20);
  ExpectRefused(ImportLayers({bomb}, Bounded(16 << 20, 1000)), "over the image's size limit");
}

TEST_F(ImageStoreTest, refuses_an_image_over_the_file_count_limit) {
  std::vector<TarEntry> many;
  for (int i = 0; i < 200; ++i) many.push_back(File(fmt::format("f{}", i), ""));
  ExpectRefused(ImportLayers({MakeTar(many)}, Bounded(1 << 30, 100)), "over the image's file count limit");
}

TEST_F(ImageStoreTest, refuses_a_manifest_naming_a_missing_blob) {
  OciLayout layout(Scratch());
  layout.AddImage({MakeTar({File("a", "a")})}, Config(), "app:1");
  for (const auto& entry : fs::directory_iterator(layout.dir() + "/blobs/sha256")) {
    if (fs::file_size(entry.path()) > 1024) fs::remove(entry.path());  // the layer: a tar is 1 KiB at least
  }
  ExpectRefused(store_->Import(layout.dir(), {}), "which it does not hold");
}

TEST_F(ImageStoreTest, refuses_a_layer_whose_content_does_not_match_its_digest) {
  OciLayout layout(Scratch());
  std::string layer = MakeTar({File("a", "a")});
  layout.AddImage({layer}, Config(), "app:1");
  WriteFile(layout.dir() + "/blobs/sha256/" + Sha256(layer).substr(7), MakeTar({File("a", "swapped")}));
  ExpectRefused(store_->Import(layout.dir(), {}), "not the " + Sha256(layer) + " its manifest names");
}

TEST_F(ImageStoreTest, refuses_malformed_json_naming_the_file) {
  OciLayout layout(Scratch());
  layout.AddImage({MakeTar({File("a", "a")})}, Config(), "app:1");
  WriteFile(layout.dir() + "/index.json", R"({"schemaVersion": 2, "manifests": [)");
  ExpectRefused(store_->Import(layout.dir(), {}), "index.json");
  WriteFile(layout.dir() + "/index.json", std::string(40, '[') + std::string(40, ']'));
  ExpectRefused(store_->Import(layout.dir(), {}), "nesting deeper than");
}

TEST_F(ImageStoreTest, refuses_an_input_that_is_no_image) {
  std::string tar = dir_.path() + "/plain.tar";
  WriteFile(tar, MakeTar({File("hello", "hi")}));
  ExpectRefused(store_->Import(tar, {}), "neither an OCI layout");
  ExpectRefused(store_->Import(dir_.path() + "/missing.tar", {}), "cannot open");
}

TEST_F(ImageStoreTest, a_whiteout_removes_what_a_lower_layer_made) {
  std::string lower = MakeTar({File("etc/gone", "x"), Dir("var/cache"), File("var/cache/a", "a"), File("keep", "k")});
  std::string upper = MakeTar({File("etc/.wh.gone", ""), File("var/.wh.cache", "")});
  auto result = ImportLayers({lower, upper});
  ASSERT_TRUE(result) << result.error().ToString();
  std::string root = RootfsOf(*result);
  EXPECT_FALSE(fs::exists(root + "/etc/gone"));
  EXPECT_FALSE(fs::exists(root + "/var/cache"));
  EXPECT_FALSE(fs::exists(root + "/etc/.wh.gone"));
  EXPECT_EQ(ReadFileOrEmpty(root + "/keep"), "k");
}

TEST_F(ImageStoreTest, an_opaque_directory_hides_the_lower_layers_contents_but_keeps_its_own) {
  std::string lower = MakeTar({File("data/old1", "1"), File("data/sub/old2", "2"), File("other", "o")});
  std::string upper = MakeTar({Dir("data"), File("data/new", "n"), File("data/.wh..wh..opq", "")});
  auto result = ImportLayers({lower, upper});
  ASSERT_TRUE(result) << result.error().ToString();
  std::string root = RootfsOf(*result);
  EXPECT_EQ(ReadFileOrEmpty(root + "/data/new"), "n");
  EXPECT_FALSE(fs::exists(root + "/data/old1"));
  EXPECT_FALSE(fs::exists(root + "/data/sub"));
  EXPECT_FALSE(fs::exists(root + "/data/.wh..wh..opq"));
  EXPECT_EQ(ReadFileOrEmpty(root + "/other"), "o");
}

TEST_F(ImageStoreTest, reads_plain_gzip_and_zstd_layers) {
  auto result = ImportLayers({MakeTar({File("a", "plain")}), MakeTar({File("b", "gzip")}, Compression::kGzip),
                              MakeTar({File("c", "zstd")}, Compression::kZstd)});
  ASSERT_TRUE(result) << result.error().ToString();
  std::string root = RootfsOf(*result);
  EXPECT_EQ(ReadFileOrEmpty(root + "/a") + ReadFileOrEmpty(root + "/b") + ReadFileOrEmpty(root + "/c"), "plaingzipzstd");
}

TEST_F(ImageStoreTest, keeps_hardlinks_and_symlinks_inside_the_image) {
  auto result = ImportLayers({MakeTar({File("usr/bin/python3.11", "py", 0755), Hardlink("usr/bin/python3", "usr/bin/python3.11"),
                                       Symlink("bin", "usr/bin"), Symlink("usr/bin/abs", "/etc/passwd")})});
  ASSERT_TRUE(result) << result.error().ToString();
  std::string root = RootfsOf(*result);
  struct stat a {}, b {};
  ASSERT_EQ(stat((root + "/usr/bin/python3.11").c_str(), &a), 0);
  ASSERT_EQ(stat((root + "/usr/bin/python3").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(fs::read_symlink(root + "/bin"), "usr/bin");
  // Kept as written: it is resolved only inside the sandbox.
  EXPECT_EQ(fs::read_symlink(root + "/usr/bin/abs"), "/etc/passwd");
}

// Imported again, a tar is read for its manifest and config only: its layer, over the small
// files' bound, is skipped. Shown by a size bound below the layer's: the store that holds the
// image imports the tar within it, an empty store, which needs the layer, refuses it.
TEST_F(ImageStoreTest, a_tar_imported_again_is_read_for_its_small_files_only) {
  std::string layer = MakeTar({File("big", std::string(5 << 20, 'x'))});
  WriteFile(dir_.path() + "/save.tar", DockerSaveTar({layer}, Config({"A=b"}), {"demo:1"}));
  auto first = store_->Import(dir_.path() + "/save.tar", {});
  ASSERT_TRUE(first) << first.error().ToString();
  ImportOptions small = Named("demo:2");
  small.max_bytes = 1 << 20;
  auto again = store_->Import(dir_.path() + "/save.tar", small);
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(again->images.at(0).id, first->images.at(0).id);
  EXPECT_EQ(Entries(store_->root() + "/tmp"), 0u);
  TempDir other("image-store-empty");
  auto empty = ImageStore::Open(other.path() + "/store");
  ASSERT_TRUE(empty);
  auto refused = empty->Import(dir_.path() + "/save.tar", small);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().ToString().find("unpacks to more than 1048576 bytes"), std::string::npos)
      << refused.error().ToString();
}

// A reference that is neither a name nor an ID is told so; a well-formed one the store lacks
// is told to be imported.
TEST_F(ImageStoreTest, find_says_what_is_wrong_with_a_reference_before_that_it_is_missing) {
  for (const char* bad : {"", "BAD NAME", "a:b:c"}) {
    auto found = store_->Find(bad);
    ASSERT_FALSE(found) << bad;
    EXPECT_NE(found.error().ToString().find("is not an image name"), std::string::npos) << found.error().ToString();
  }
  for (const char* absent : {"ok/name:1", "0123456789abcdef"}) {
    auto found = store_->Find(absent);
    ASSERT_FALSE(found) << absent;
    EXPECT_NE(found.error().ToString().find("smolbox image import"), std::string::npos) << found.error().ToString();
  }
}

TEST_F(ImageStoreTest, imports_a_docker_save_tar_plain_or_gzipped_with_a_repeated_layer_linked) {
  std::string base = MakeTar({File("etc/os-release", "ID=dockerish\n")});
  std::string tar = DockerSaveTar({base, MakeTar({File("app", "1")}), base}, Config({"A=b"}, {{"Cmd", {"/app"}}}),
                                  {"docker.io/library/demo:2"});
  WriteFile(dir_.path() + "/save.tar", tar);
  auto result = store_->Import(dir_.path() + "/save.tar", {});
  ASSERT_TRUE(result) << result.error().ToString();
  ASSERT_EQ(result->images.size(), 1u);
  EXPECT_EQ(result->images[0].names, std::vector<std::string>{"demo:2"});
  EXPECT_EQ(result->images[0].config.cmd, std::vector<std::string>{"/app"});
  EXPECT_EQ(ReadFileOrEmpty(RootfsOf(*result) + "/etc/os-release"), "ID=dockerish\n");
  // The same tar through gzip: the same image, by the same ID.
  ProgramRun gzip = RunProgram({"/bin/sh", "-c", fmt::format("gzip -c {0}/save.tar > {0}/save.tar.gz", dir_.path())});
  ASSERT_EQ(gzip.exit_code, 0) << gzip.err;
  auto again = store_->Import(dir_.path() + "/save.tar.gz", Named("demo:gz"));
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(again->images[0].id, result->images[0].id);
  auto found = store_->Find("demo:gz");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->names.size(), 2u);
}

TEST_F(ImageStoreTest, names_one_of_several_images_with_name_and_says_what_the_input_holds) {
  OciLayout layout(Scratch());
  layout.AddImage({MakeTar({File("which", "one")})}, Config(), "one");
  layout.AddImage({MakeTar({File("which", "two")})}, Config(), "two");
  auto missing = store_->Import(layout.dir(), Named("app:three"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().ToString().find("holds no image named app:three (it holds: one, two)"), std::string::npos)
      << missing.error().ToString();
  auto result = store_->Import(layout.dir(), Named("app:two"));
  ASSERT_TRUE(result) << result.error().ToString();
  ASSERT_EQ(result->images.size(), 1u);
  EXPECT_EQ(ReadFileOrEmpty(RootfsOf(*result) + "/which"), "two");
  auto listed = store_->List();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->at(0).names, std::vector<std::string>{"app:two"});
}

TEST_F(ImageStoreTest, shares_a_layer_between_images_and_frees_it_with_the_last_image_that_holds_it) {
  std::string base = MakeTar({File("base", "b")});
  auto first = ImportLayers({base, MakeTar({File("one", "1")})}, Named("one"));
  auto second = ImportLayers({base, MakeTar({File("two", "2")})}, Named("two"));
  ASSERT_TRUE(first && second);
  const std::string blobs = store_->root() + "/blobs/sha256";
  EXPECT_EQ(Entries(blobs), 3u);
  auto removed = store_->Remove("one");
  ASSERT_TRUE(removed) << removed.error().ToString();
  EXPECT_EQ(*removed, (std::vector<std::string>{"untagged: one:latest", "deleted: " + first->images[0].id}));
  EXPECT_EQ(Entries(blobs), 2u);
  EXPECT_TRUE(fs::exists(blobs + "/" + Sha256(base).substr(7)));
  EXPECT_FALSE(fs::exists(RootfsOf(*first)));
  auto gone = store_->Find("one");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().ToString().find("smolbox image import"), std::string::npos) << gone.error().ToString();
  ASSERT_TRUE(store_->Remove(second->images[0].id.substr(7, 12)));
  ExpectNothingLeft();
}

TEST_F(ImageStoreTest, untags_by_name_and_deletes_by_id) {
  auto result = ImportLayers({MakeTar({File("a", "a")})}, Named("app:1"));
  ASSERT_TRUE(result);
  ASSERT_TRUE(ImportLayers({MakeTar({File("a", "a")})}, Named("app:2")));
  auto untagged = store_->Remove("app:1");
  ASSERT_TRUE(untagged);
  EXPECT_EQ(*untagged, std::vector<std::string>{"untagged: app:1"});
  ASSERT_TRUE(store_->Find("app:2"));
  auto deleted = store_->Remove(result->images[0].id);
  ASSERT_TRUE(deleted);
  ExpectNothingLeft();
}

TEST_F(ImageStoreTest, two_imports_of_the_same_image_at_once_both_succeed_and_store_it_once) {
  OciLayout layout(Scratch());
  std::vector<TarEntry> files;
  for (int i = 0; i < 300; ++i) files.push_back(File(fmt::format("d/f{}", i), std::string(4096, 'x')));
  layout.AddImage({MakeTar(files, Compression::kGzip)}, Config(), "app:1");
  Expected<ImportResult> a = std::unexpected(Error{}), b = std::unexpected(Error{});
  std::thread other([&] { a = store_->Import(layout.dir(), {}); });
  b = store_->Import(layout.dir(), {});
  other.join();
  ASSERT_TRUE(a) << a.error().ToString();
  ASSERT_TRUE(b) << b.error().ToString();
  EXPECT_EQ(a->images[0].id, b->images[0].id);
  EXPECT_EQ(Entries(store_->root() + "/images"), 1u);
  EXPECT_EQ(Entries(store_->root() + "/blobs/sha256"), 1u);
  EXPECT_EQ(Entries(store_->root() + "/tmp"), 0u);
  EXPECT_EQ(ReadFileOrEmpty(RootfsOf(*a) + "/d/f299"), std::string(4096, 'x'));
}

TEST_F(ImageStoreTest, an_interrupted_import_is_swept_by_the_next) {
  // What a killed import leaves: a staging tree and a half-copied blob.
  WriteFile(store_->root() + "/tmp/import-killed/input/0", "half");
  WriteFile(store_->root() + "/blobs/sha256/.tmp-killed", "half");
  ASSERT_TRUE(ImportLayers({MakeTar({File("a", "a")})}));
  EXPECT_EQ(Entries(store_->root() + "/tmp"), 0u);
  EXPECT_FALSE(fs::exists(store_->root() + "/blobs/sha256/.tmp-killed"));
}

TEST(ImageReference, gives_a_name_its_default_tag_and_refuses_what_is_no_name) {
  EXPECT_EQ(*image::NormalizeReference("app", "f"), "app:latest");
  EXPECT_EQ(*image::NormalizeReference("team/app:1.2", "f"), "team/app:1.2");
  EXPECT_EQ(*image::NormalizeReference("localhost:5000/app", "f"), "localhost:5000/app:latest");
  for (const char* bad : {"App", "app:", "app:-x", "../app", "app@sha256:00", "a//b", ""}) {
    auto refused = image::NormalizeReference(bad, "--image");
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().where, "--image");
  }
  EXPECT_FALSE(image::IsStoreReference("host"));
  EXPECT_FALSE(image::IsStoreReference("/srv/rootfs"));
  EXPECT_FALSE(image::IsStoreReference("./rootfs"));
  EXPECT_TRUE(image::IsStoreReference("python:3.11"));
}

#ifdef SMOLBOX_MUTANTS
// A mutant build's image tests measure the image guards (smolvm-check mutate runs them with
// SMOLBOX_DISABLE naming the guard off), as the runtime does at its start.
class MutantSwitches : public ::testing::Environment {
 public:
  void SetUp() override {
    auto loaded = mutant::LoadFromEnvironment();
    ASSERT_TRUE(loaded) << loaded.error().ToString();
  }
};
const ::testing::Environment* const kMutantSwitches = ::testing::AddGlobalTestEnvironment(new MutantSwitches);
#endif

}  // namespace
}  // namespace smolbox::testing
