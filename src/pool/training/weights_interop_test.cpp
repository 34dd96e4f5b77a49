// The Python helper (examples/train/runsnack_train.py) and the C++ parser and
// writer read each other's files, byte for byte. Needs python3 with numpy
// (apt: python3-numpy); skipped with the reason where there is none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pool/training/weights.hpp"

namespace runsnack::pool::training {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first python3 that imports numpy: PATH's (a pyenv shim may have none), then Debian's.
std::string python_with_numpy() {
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import numpy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return candidate;
  }
  return {};
}

Weights expected() {
  Weights w;
  w.tensors["fc1.weight"] = {{2, 3}, {0, 0.5f, 1, 1.5f, 2, 2.5f}};
  w.tensors["fc1.bias"] = {{2}, {-1.25f, 3e-8f}};
  w.tensors["scalar"] = {{}, {42}};
  w.tensors["empty"] = {{0, 3}, {}};
  w.tensors["caf\xc3\xa9"] = {{1}, {-0.0f}};  // a UTF-8 name
  w.metadata["round"] = "3";
  return w;
}

// Python building the same weights as expected(), with `helper` imported as rs.
const char* kPythonWeights = R"(
import numpy as np
tensors = {
    "fc1.weight": np.arange(6, dtype=np.float64).reshape(2, 3) * 0.5,
    "fc1.bias": np.array([-1.25, 3e-8], dtype=np.float32),
    "scalar": np.float32(42),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "caf\u00e9": np.array([-0.0], dtype=np.float32),
}
)";

class WeightsInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = python_with_numpy();
    if (python_.empty()) GTEST_SKIP() << "no python3 with numpy here (apt: python3-numpy)";
    dir_ = fs::temp_directory_path() / ("runsnack-weights-interop-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs `body` after importing the helper as rs; false (with its output logged) if it failed.
  bool run_python(const std::string& body) {
    std::ofstream(dir_ / "script.py")
        << "import sys\nsys.path.insert(0, '" RUNSNACK_TRAIN_HELPER_DIR "')\nimport runsnack_train as rs\n"
        << kPythonWeights << body;
    const std::string cmd =
        python_ + " " + (dir_ / "script.py").string() + " > " + (dir_ / "log").string() + " 2>&1";
    const bool ok = std::system(cmd.c_str()) == 0;
    if (!ok) ADD_FAILURE() << slurp(dir_ / "log");
    return ok;
  }

  std::string python_;
  fs::path dir_;
};

TEST_F(WeightsInterop, PythonWritesWhatCppReadsAndWrites) {
  const auto path = (dir_ / "py.safetensors").string();
  ASSERT_TRUE(run_python("rs.save_weights('" + path + "', tensors, {'round': '3'})\n"));
  const std::string bytes = slurp(path);
  auto parsed = parse_weights(bytes);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, expected());
  EXPECT_EQ(encode_weights(expected()).value(), bytes);  // the two writers agree byte for byte
}

TEST_F(WeightsInterop, CppWritesWhatPythonReads) {
  const auto path = (dir_ / "cpp.safetensors").string();
  std::ofstream(path, std::ios::binary) << encode_weights(expected()).value();
  const auto again = (dir_ / "again.safetensors").string();
  ASSERT_TRUE(run_python("loaded = rs.load_weights('" + path + R"(')
assert sorted(loaded) == sorted(tensors), sorted(loaded)
for name, want in tensors.items():
    got = loaded[name]
    assert got.dtype == np.float32 and got.shape == np.shape(want), (name, got.dtype, got.shape)
    assert np.array_equal(got, np.asarray(want, dtype=np.float32)), (name, got)
assert np.signbit(loaded["caf\u00e9"][0])
rs.save_weights(')" + again +
                         "', loaded, {'round': '3'})\n"));
  EXPECT_EQ(slurp(again), slurp(path));
}

TEST_F(WeightsInterop, ContractReadsTheEnvironment) {
  ASSERT_TRUE(run_python(R"(
env = {"RUNSNACK_WEIGHTS_IN": "in.safetensors", "RUNSNACK_WEIGHTS_OUT": "out.safetensors",
       "RUNSNACK_DATA_DIR": "shard", "RUNSNACK_STEPS": "50", "RUNSNACK_SEED": "7", "RUNSNACK_ROUND": "2"}
job = rs.contract(env)
assert job == rs.Contract("in.safetensors", "out.safetensors", "shard", 50, 7, 2), job
for broken in ({**env, "RUNSNACK_STEPS": "many"}, {k: v for k, v in env.items() if k != "RUNSNACK_SEED"}):
    try:
        rs.contract(broken)
        raise AssertionError("accepted %r" % broken)
    except SystemExit as e:
        assert "RUNSNACK_" in str(e), e
)"));
}

}  // namespace
}  // namespace runsnack::pool::training
