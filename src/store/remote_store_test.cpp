#include "store/remote_store.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/paths.hpp"
#include "store/temp_dir_for_test.hpp"

namespace runsnack {
namespace {

const std::string kLink =
    "runsnack://rv.example.org:7000/PEERIDPEERIDPEERIDPEERIDPEERID00/GRANTID000#k=secretsecret";

class RemoteStoreTest : public ::testing::Test {
 protected:
  testing::TempDir dir;
  std::filesystem::path file = dir.path() / kRemotesFileName;
  RemoteStore store{file};
};

TEST_F(RemoteStoreTest, EmptyWhenNoFile) {
  auto all = store.list();
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
  EXPECT_FALSE(*store.get("x"));
  EXPECT_FALSE(*store.remove("x"));
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(RemoteStoreTest, AddGetListRemove) {
  ASSERT_TRUE(store.add("gpu-box", kLink, false));
  ASSERT_TRUE(store.add("a.b_c-1", kLink + "2", false));
  EXPECT_EQ(**store.get("gpu-box"), kLink);

  auto all = store.list();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].first, "a.b_c-1");  // sorted by name
  EXPECT_EQ((*all)[1].second, kLink);

  // Another store on the same file sees the same (each call rereads).
  RemoteStore other(file);
  EXPECT_EQ(**other.get("a.b_c-1"), kLink + "2");

  EXPECT_TRUE(*store.remove("gpu-box"));
  EXPECT_FALSE(*store.remove("gpu-box"));
  EXPECT_FALSE(*store.get("gpu-box"));
  EXPECT_EQ(store.list()->size(), 1u);
}

TEST_F(RemoteStoreTest, ReplaceOnlyWhenAsked) {
  ASSERT_TRUE(store.add("box", kLink, false));
  auto again = store.add("box", kLink + "x", false);
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is(errc::invalid_argument));
  EXPECT_EQ(**store.get("box"), kLink);
  ASSERT_TRUE(store.add("box", kLink + "x", true));
  EXPECT_EQ(**store.get("box"), kLink + "x");
}

TEST_F(RemoteStoreTest, FileIsPrivate) {
  ASSERT_TRUE(store.add("box", kLink, false));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(RemoteStoreTest, BadNamesAndLinksRefused) {
  for (const std::string& name : {std::string(""), std::string(65, 'a'), std::string("has space"),
                                  std::string("slash/x"), std::string("ünï"), std::string("a\nb")}) {
    auto r = store.add(name, kLink, false);
    ASSERT_FALSE(r) << name;
    EXPECT_TRUE(r.error().is(errc::invalid_argument));
  }
  EXPECT_TRUE(store.add(std::string(64, 'a'), kLink, false));
  for (const std::string& link : {std::string(""), std::string("two links"), std::string("a\tb"),
                                  std::string(kRemoteLinkMaxBytes + 1, 'x')}) {
    auto r = store.add("ok", link, false);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::invalid_argument));
  }
}

TEST_F(RemoteStoreTest, DamagedFileIsMalformedNotACrash) {
  for (const std::string& text :
       {std::string("not json"), std::string("[]"), std::string(R"({"version":2,"remotes":{}})"),
        std::string(R"({"version":1})"), std::string(R"({"version":1,"remotes":{"bad name":"x"}})"),
        std::string(R"({"version":1,"remotes":{"ok":42}})")}) {
    ASSERT_TRUE(write_file_atomic(file, text, 0600));
    auto r = store.list();
    ASSERT_FALSE(r) << text;
    EXPECT_TRUE(r.error().is(errc::malformed)) << text;
    EXPECT_FALSE(store.add("x", kLink, false));  // never overwrite a file we cannot read
  }
}

}  // namespace
}  // namespace runsnack
