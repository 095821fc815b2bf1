// An image's User, looked up as docker looks it up: in the image's own /etc/passwd and
// /etc/group, beneath its root, never through a link that could name a host file.
#include "smolbox/image_spec.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.h"

namespace smolbox::testing {
namespace {

namespace fs = std::filesystem;

class ImageUser : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(rootfs_.path() + "/etc");
    rootfs_.Write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:1200:app:/srv:/bin/sh\n");
    rootfs_.Write("etc/group", "root:x:0:\nstaff:x:50:\n");
  }
  Expected<WorkloadUser> Resolve(const std::string& user) { return image::ResolveImageUser(rootfs_.path(), user); }

  TempDir rootfs_{"image-user"};
};

TEST_F(ImageUser, names_and_numbers_are_looked_up_in_the_images_own_files) {
  auto app = Resolve("app");
  ASSERT_TRUE(app) << app.error().ToString();
  EXPECT_EQ(app->uid, 1234u);
  EXPECT_EQ(app->gid, 1200u);
  auto numeric = Resolve("1234");  // its group from the passwd line
  ASSERT_TRUE(numeric);
  EXPECT_EQ(numeric->gid, 1200u);
  auto with_group = Resolve("app:staff");
  ASSERT_TRUE(with_group);
  EXPECT_EQ(with_group->gid, 50u);
  auto unlisted = Resolve("77");  // a number the image does not list: its own group
  ASSERT_TRUE(unlisted);
  EXPECT_EQ(unlisted->gid, 77u);
}

TEST_F(ImageUser, a_name_the_image_does_not_list_is_an_error_naming_the_file) {
  auto missing = Resolve("nobody-here");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().ToString().find("/etc/passwd"), std::string::npos) << missing.error().ToString();
  auto group = Resolve("app:wheel");
  ASSERT_FALSE(group);
  EXPECT_NE(group.error().ToString().find("/etc/group"), std::string::npos) << group.error().ToString();
}

// The host has a root account; an image whose /etc/passwd links to the host's must not find it.
TEST_F(ImageUser, a_linked_passwd_or_group_is_refused_not_followed) {
  fs::remove(rootfs_.path() + "/etc/passwd");
  fs::create_symlink("/etc/passwd", rootfs_.path() + "/etc/passwd");
  auto root = Resolve("root");
  ASSERT_FALSE(root);
  EXPECT_NE(root.error().ToString().find("its /etc/passwd is a link"), std::string::npos) << root.error().ToString();
  fs::remove(rootfs_.path() + "/etc/passwd");
  fs::create_symlink("../../" + rootfs_.path() + "/etc/group", rootfs_.path() + "/etc/passwd");
  EXPECT_FALSE(Resolve("root"));
  fs::remove(rootfs_.path() + "/etc/passwd");
  rootfs_.Write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
  fs::remove(rootfs_.path() + "/etc/group");
  fs::create_symlink("/etc/group", rootfs_.path() + "/etc/group");
  auto group = Resolve("root:root");
  ASSERT_FALSE(group);
  EXPECT_NE(group.error().ToString().find("its /etc/group is a link"), std::string::npos) << group.error().ToString();
}

TEST_F(ImageUser, an_oversized_passwd_is_refused) {
  rootfs_.Write("etc/passwd", std::string(5 << 20, '#'));
  auto user = Resolve("app");
  ASSERT_FALSE(user);
  EXPECT_NE(user.error().ToString().find("is larger than"), std::string::npos) << user.error().ToString();
}

}  // namespace
}  // namespace smolbox::testing
