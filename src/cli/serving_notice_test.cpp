#include "cli/serving_notice.hpp"

#include "crypto/identity.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace runsnack::cli {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("rs-serving-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
};

ServingShare sample() {
  ServingShare s;
  s.pid = ::getpid();
  s.peer = Identity::generate()->peer_id();
  s.listen = "0.0.0.0:7443";
  s.candidates = {*parse_endpoint("192.0.2.7:7443"), *parse_endpoint("[2001:db8::1]:7443")};
  s.rendezvous = *parse_endpoint("rdv.example.org:7443");
  return s;
}

TEST(ServingNotice, PublishedWhileAliveAndRemovedAfter) {
  Scratch s;
  ServingShare share = sample();
  {
    auto notice = ServingNotice::publish(s.dir, share);
    ASSERT_TRUE(notice) << notice.error().what();
    struct stat st {};
    ASSERT_EQ(::stat((s.dir / kServingFile).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    auto found = find_serving_share(s.dir);
    ASSERT_TRUE(found && *found);
    EXPECT_EQ((*found)->peer, share.peer);
    EXPECT_EQ((*found)->candidates, share.candidates);
    EXPECT_EQ((*found)->rendezvous, share.rendezvous);
    EXPECT_EQ((*found)->listen, "0.0.0.0:7443");
  }
  EXPECT_FALSE(fs::exists(s.dir / kServingFile));
  auto found = find_serving_share(s.dir);
  ASSERT_TRUE(found);
  EXPECT_FALSE(*found);
}

TEST(ServingNotice, AFileLeftByACrashedShareIsStale) {
  Scratch s;
  ServingShare share = sample();
  pid_t child = ::fork();
  if (child == 0) {
    auto notice = ServingNotice::publish(s.dir, share);
    ::_exit(notice ? 0 : 1);  // dies without the destructor: the file stays, its lock goes
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(fs::exists(s.dir / kServingFile));
  auto found = find_serving_share(s.dir);
  ASSERT_TRUE(found);
  EXPECT_FALSE(*found);
}

// A member of the folder's group plants a notice of his own (the machine's state is 2770):
// `share` of another member must not send its links to his address and PeerId.
TEST(ServingNotice, ANoticeOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to write a file as another user";
  Scratch s;
  ServingShare share = sample();
  auto notice = ServingNotice::publish(s.dir, share);
  ASSERT_TRUE(notice);
  ASSERT_EQ(::chown((s.dir / kServingFile).c_str(), 65534, 65534), 0);  // as if user nobody wrote it
  ASSERT_EQ(::chown(s.dir.c_str(), 1, 1), 0);                           // a folder owned by someone else than root
  auto found = find_serving_share(s.dir);
  ASSERT_FALSE(found);
  EXPECT_NE(found.error().message.find("not by the folder's owner"), std::string::npos) << found.error().message;
}

}  // namespace
}  // namespace runsnack::cli
