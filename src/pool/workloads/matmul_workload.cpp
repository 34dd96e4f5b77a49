// matmul: C = A*B split into block x block tiles of C; each task computes one
// tile with BLAS on the worker, the coordinator checks every tile with
// Freivalds' algorithm before accepting (and paying for) it, and the
// submitter assembles C.npy. A and B come from a seed (any size, nothing to
// send) or from .npy files (--a/--b, carried as job input).
#include "core/json_fields.hpp"
#include "pool/matmul/matrix.hpp"
#include "pool/result_message.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"

#include <openssl/rand.h>

#include <chrono>
#include <future>
#include <map>
#include <mutex>

namespace runsnack::pool {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using matmul::Matrix;

constexpr std::int64_t kMaxDim = 65536;
constexpr std::int64_t kMaxBlock = 1024;   // a tile's result (4 MiB) fits one pool message
constexpr int kMaxRounds = 64;
constexpr double kDefaultTolerance = 1e-5;  // relative to the check's magnitude (matrix.hpp)

struct Shape {
  std::int64_t m = 0, k = 0, p = 0, block = 0;
  std::int64_t row_blocks() const { return (m + block - 1) / block; }
  std::int64_t col_blocks() const { return (p + block - 1) / block; }
  // Tile `index` covers rows [r0, r0+rows) and columns [c0, c0+cols) of C.
  void tile(std::int64_t index, std::int64_t& r0, std::int64_t& rows, std::int64_t& c0, std::int64_t& cols) const {
    r0 = index / col_blocks() * block, c0 = index % col_blocks() * block;
    rows = std::min(block, m - r0), cols = std::min(block, p - c0);
  }
};

Result<Shape> read_shape(const json& spec) {
  if (!spec.is_object()) return fail(errc::invalid_argument, "matmul: the spec must be an object");
  Shape s;
  for (auto [key, out] : {std::pair<const char*, std::int64_t*>{"m", &s.m}, {"k", &s.k}, {"p", &s.p}, {"block", &s.block}}) {
    if (!spec.contains(key) || !spec[key].is_number_integer()) return fail(errc::invalid_argument, std::string("matmul: no ") + key);
    *out = spec[key].get<std::int64_t>();
  }
  if (s.m < 1 || s.k < 1 || s.p < 1 || s.m > kMaxDim || s.k > kMaxDim || s.p > kMaxDim)
    return fail(errc::invalid_argument, "matmul: dimensions must be 1.." + std::to_string(kMaxDim));
  if (s.block < 1 || s.block > kMaxBlock) return fail(errc::invalid_argument, "matmul: --block must be 1.." + std::to_string(kMaxBlock));
  if (s.row_blocks() * s.col_blocks() > kMaxShards)
    return fail(errc::invalid_argument, "matmul: more than " + std::to_string(kMaxShards) + " tiles; use a larger --block");
  return s;
}

std::uint64_t spec_seed(const json& spec) {
  return spec.contains("seed") && spec["seed"].is_number_unsigned() ? spec["seed"].get<std::uint64_t>() : 1;
}
bool seeded(const json& spec) { return string_or(spec, "source", "seed") == "seed"; }

// The job input's file `name` as a matrix.
Result<Matrix> input_matrix(const json& input, const std::string& name) {
  if (input.is_object() && input.contains("files") && input["files"].is_array())
    for (const auto& f : input["files"])
      if (f.is_object() && string_or(f, "path") == name) {
        auto bytes = base64_decode(string_or(f, "data"));
        if (!bytes) return bytes.error();
        return matmul::parse_npy(*bytes);
      }
  return fail(errc::malformed, "matmul: the job has no input " + name);
}

Result<Matrix> matrix_from_dir(const fs::path& dir, const std::string& name) {
  auto bytes = read_file(dir / name, 1ull << 31);
  if (!bytes) return bytes.error();
  return matmul::parse_npy(*bytes);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Freivalds on the coordinator (matrix.hpp). S_i' * A_i and B_j * R_j are
// made once per row and column of tiles and kept: every tile shares them.
class FreivaldsChecker final : public ResultChecker {
 public:
  FreivaldsChecker(json spec, Shape shape, int rounds, double tolerance, std::optional<Matrix> a, std::optional<Matrix> b)
      : spec_(std::move(spec)), shape_(shape), rounds_(rounds), tolerance_(tolerance), a_(std::move(a)), b_(std::move(b)) {
    RAND_bytes(reinterpret_cast<unsigned char*>(&secret_), sizeof secret_);
  }

  Verdict check(std::int64_t index, const TaskResult& result) override {
    if (index < 0 || index >= shape_.row_blocks() * shape_.col_blocks()) return {false, "no such tile"};
    std::int64_t r0, rows, c0, cols;
    shape_.tile(index, r0, rows, c0, cols);
    // A tile comes as a binary frame (raw little-endian float32, checked in
    // place) or, from older workers, as base64, decoded into a buffer kept
    // between checks: a tile is 4 MiB, and fresh pages cost more than the
    // check itself.
    std::string_view tile;
    Result<void> decoded = fail(errc::malformed, "no tile.f32 in the result");
    for (const auto& f : result.files)  // by reference: a tile's text is megabytes
      if (f.is_object() && string_or(f, "path") == "tile.f32") {
        if (auto i = frame_of(f, result.frames.size())) {
          tile = result.frames[*i], decoded = {};
        } else if (f.contains("data") && f["data"].is_string()) {
          tile_.resize(static_cast<std::size_t>(rows * cols) * sizeof(float));
          decoded = base64_decode_into(f["data"].get_ref<const std::string&>(), tile_);
          tile = tile_;
        }
      }
    if (!decoded) return {false, "tile " + std::to_string(index) + ": " + decoded.error().what()};
    const auto bi = static_cast<std::uint64_t>(r0 / shape_.block), bj = static_cast<std::uint64_t>(c0 / shape_.block);
    make_sides(bi, bj);
    auto outcome = matmul::freivalds_check(rows_.at(bi), cols_.at(bj), tile, rows, cols, tolerance_);
    double compute = 0;
    if (auto line = json::parse(result.stdout_data, nullptr, false); line.is_object() && line.contains("compute_s") &&
                                                                     line["compute_s"].is_number())
      compute = line["compute_s"].get<double>();
    if (!outcome.accepted)
      return {false, "tile " + std::to_string(index) + " fails Freivalds' check (error " + std::to_string(outcome.max_error) +
                         " over tolerance " + std::to_string(tolerance_) + ")", compute};
    return {true, "", compute};
  }

 private:
  // S_i' * A_i for row of tiles bi.
  matmul::FreivaldsSide row_side(std::uint64_t bi) const {
    const std::int64_t r0 = static_cast<std::int64_t>(bi) * shape_.block, rows = std::min(shape_.block, shape_.m - r0);
    Matrix s = matmul::freivalds_vectors(secret_, 2 * bi, rows, rounds_);
    Matrix left = a_ ? matmul::left_side(s, matmul::sub_block(*a_, r0, rows, 0, shape_.k))
                     : matmul::seeded_left_side(spec_seed(spec_), shape_.k, r0, s);
    return matmul::freivalds_side(std::move(s), std::move(left));
  }
  // B_j * R_j for column of tiles bj.
  matmul::FreivaldsSide col_side(std::uint64_t bj) const {
    const std::int64_t c0 = static_cast<std::int64_t>(bj) * shape_.block, cols = std::min(shape_.block, shape_.p - c0);
    Matrix r = matmul::freivalds_vectors(secret_, 2 * bj + 1, cols, rounds_);
    Matrix right = b_ ? matmul::right_side(matmul::sub_block(*b_, 0, shape_.k, c0, cols), r)
                      : matmul::seeded_right_side(spec_seed(spec_), shape_.k, c0, r);
    return matmul::freivalds_side(std::move(r), std::move(right));
  }
  // Makes the sides tile (bi, bj) needs. One that is missing is made together with, on a second
  // core, a missing side of the other kind (the first one; a later tile needs it): pairs halve
  // the time checks wait for sides, as the workers' sgemm uses every core too.
  void make_sides(std::uint64_t bi, std::uint64_t bj) {
    const bool need_row = !rows_.count(bi), need_col = !cols_.count(bj);
    if (!need_row && !need_col) return;
    std::optional<std::uint64_t> row = need_row ? std::optional(bi) : std::nullopt;
    std::optional<std::uint64_t> col = need_col ? std::optional(bj) : std::nullopt;
    if (!row)
      for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(shape_.row_blocks()) && !row; ++i)
        if (!rows_.count(i)) row = i;
    if (!col)
      for (std::uint64_t j = 0; j < static_cast<std::uint64_t>(shape_.col_blocks()) && !col; ++j)
        if (!cols_.count(j)) col = j;
    std::future<matmul::FreivaldsSide> other;
    if (row && col) other = std::async(std::launch::async, [this, j = *col] { return col_side(j); });
    if (row) rows_.emplace(*row, row_side(*row));
    if (other.valid()) cols_.emplace(*col, other.get());
    else if (col) cols_.emplace(*col, col_side(*col));
  }

  json spec_;
  Shape shape_;
  int rounds_;
  double tolerance_;
  std::optional<Matrix> a_, b_;
  std::uint64_t secret_ = 0;
  std::map<std::uint64_t, matmul::FreivaldsSide> rows_, cols_;
  std::string tile_;
};

class MatmulWorkload final : public Workload {
 public:
  std::string_view name() const override { return "matmul"; }

  Result<json> make_spec(const SubmitOptions& o, json& input) const override {
    json spec = {{"block", o.block > 0 ? o.block : std::min<std::int64_t>(1024, std::max<std::int64_t>(o.n, 1))},
                 {"rounds", o.rounds}, {"tolerance", o.tolerance > 0 ? o.tolerance : kDefaultTolerance}};
    input = {{"files", json::array()}};
    if (o.a_file.empty() != o.b_file.empty()) return fail(errc::invalid_argument, "matmul: give both --a and --b, or --seed");
    if (!o.a_file.empty()) {
      std::size_t total = 0;
      std::int64_t dims[2][2];
      int i = 0;
      for (const auto& [path, name] : {std::pair{o.a_file, "A.npy"}, std::pair{o.b_file, "B.npy"}}) {
        auto bytes = read_file(path, kMaxInputBytes);
        if (!bytes) return fail(errc::too_large, bytes.error().what() + "; --a/--b travel with the job (4 MiB in all): use --seed for large products");
        total += bytes->size();
        if (total > kMaxInputBytes) return fail(errc::too_large, "matmul: --a and --b are over 4 MiB together: use --seed for large products");
        auto m = matmul::parse_npy(*bytes);
        if (!m) return fail(errc::invalid_argument, path + ": " + m.error().what());
        dims[i][0] = m->rows, dims[i][1] = m->cols;
        ++i;
        input["files"].push_back({{"path", name}, {"data", base64_encode(*bytes)}});
      }
      if (dims[0][1] != dims[1][0])
        return fail(errc::invalid_argument, "matmul: A is " + std::to_string(dims[0][0]) + "x" + std::to_string(dims[0][1]) +
                                                 " and B is " + std::to_string(dims[1][0]) + "x" + std::to_string(dims[1][1]) +
                                                 ": A's columns must equal B's rows");
      spec["source"] = "files";
      spec["m"] = dims[0][0], spec["k"] = dims[0][1], spec["p"] = dims[1][1];
      if (o.block <= 0) spec["block"] = std::min<std::int64_t>(1024, std::max(dims[0][0], dims[1][1]));
    } else {
      if (o.n < 1) return fail(errc::invalid_argument, "matmul needs --n N (with --seed S) or --a FILE --b FILE");
      spec["source"] = "seed";
      spec["seed"] = o.seed;
      spec["m"] = spec["k"] = spec["p"] = o.n;
    }
    if (auto p = plan(spec); !p) return p.error();
    return spec;
  }

  Result<JobPlan> plan(const json& spec) const override {
    auto s = read_shape(spec);
    if (!s) return s.error();
    if (!spec.contains("rounds") || !spec["rounds"].is_number_integer() || spec["rounds"].get<int>() < 1 ||
        spec["rounds"].get<int>() > kMaxRounds)
      return fail(errc::invalid_argument, "matmul: --rounds must be 1.." + std::to_string(kMaxRounds));
    if (!spec.contains("tolerance") || !spec["tolerance"].is_number() || !(spec["tolerance"].get<double>() > 0) ||
        spec["tolerance"].get<double>() > 1)
      return fail(errc::invalid_argument, "matmul: --tolerance must be in (0, 1]");
    std::string source = string_or(spec, "source");
    if (source != "seed" && source != "files") return fail(errc::invalid_argument, "matmul: source must be seed or files");
    // A browser worker makes seeded tiles itself but cannot read the job's .npy files.
    return JobPlan{s->row_blocks() * s->col_blocks(), source == "seed" ? "matmul-seeded" : "matmul-files",
                   {{"matrix", {{"m", s->m}, {"k", s->k}, {"p", s->p}, {"block", s->block}}}}};
  }

  boost::asio::awaitable<Result<TaskOutput>> run(TaskWork work) const override {
    auto s = read_shape(work.spec);
    if (!s) co_return s.error();
    std::int64_t r0, rows, c0, cols;
    s->tile(work.index, r0, rows, c0, cols);
    auto start = std::chrono::steady_clock::now();
    Matrix a, b;  // b holds B_j's columns as rows for a seeded job (matrix.hpp)
    const bool by_columns = seeded(work.spec);
    if (by_columns) {
      a = matmul::seeded_lines(spec_seed(work.spec), 'A', s->k, r0, rows);
      b = matmul::seeded_lines(spec_seed(work.spec), 'B', s->k, c0, cols);
    } else {
      auto fa = matrix_from_dir(work.input_dir, "A.npy");
      if (!fa) co_return fa.error();
      auto fb = matrix_from_dir(work.input_dir, "B.npy");
      if (!fb) co_return fb.error();
      a = matmul::sub_block(*fa, r0, rows, 0, s->k);
      b = matmul::sub_block(*fb, 0, s->k, c0, cols);
    }
    double prepare = seconds_since(start);
    auto gemm_start = std::chrono::steady_clock::now();
    Matrix c = by_columns ? matmul::multiply_transposed(a, b) : matmul::multiply(a, b);
    double compute = seconds_since(gemm_start);
    TaskOutput out;
    // The timing is part of the signed stdout: the coordinator reports
    // verification cost against it.
    out.stdout_data = json{{"tile", work.index}, {"rows", rows}, {"cols", cols}, {"compute_s", compute},
                           {"prepare_s", prepare}}.dump() + "\n";
    // Raw float32 in a binary frame (wire.hpp): base64 in JSON cost the
    // coordinator more to decode than the check itself.
    out.files.push_back({{"path", "tile.f32"}, {"frame", 0}});
    out.frames.push_back(matmul::to_bytes(c));
    co_return out;
  }

  json verification_method(const json& spec) const override {
    return {{"method", "freivalds"}, {"rounds", int_or(spec, "rounds", 10)}, {"tolerance", number_or(spec, "tolerance", kDefaultTolerance)}};
  }

  Result<std::unique_ptr<ResultChecker>> checker(const json& spec, const json& input) const override {
    auto s = read_shape(spec);
    if (!s) return s.error();
    std::optional<Matrix> a, b;
    if (!seeded(spec)) {
      auto fa = input_matrix(input, "A.npy");
      if (!fa) return fa.error();
      auto fb = input_matrix(input, "B.npy");
      if (!fb) return fb.error();
      if (fa->rows != s->m || fa->cols != s->k || fb->rows != s->k || fb->cols != s->p)
        return fail(errc::invalid_argument, "matmul: the input matrices do not match the spec's shape");
      a = std::move(*fa), b = std::move(*fb);
    }
    return std::unique_ptr<ResultChecker>(std::make_unique<FreivaldsChecker>(
        spec, *s, int_or(spec, "rounds", 10), number_or(spec, "tolerance", kDefaultTolerance), std::move(a), std::move(b)));
  }

  Result<json> merge(const json& spec, std::int64_t tasks, const fs::path& shards, const fs::path& out) const override {
    auto s = read_shape(spec);
    if (!s) return s.error();
    Matrix c{s->m, s->p, std::vector<float>(static_cast<std::size_t>(s->m * s->p))};
    double compute = 0;
    for (std::int64_t i = 0; i < tasks; ++i) {
      std::int64_t r0, rows, c0, cols;
      s->tile(i, r0, rows, c0, cols);
      fs::path dir = shards / ("shard-" + std::to_string(i));
      auto bytes = read_file(dir / "tile.f32", 1ull << 30);
      if (!bytes) return fail(errc::not_found, "tile " + std::to_string(i) + " is missing: " + bytes.error().what());
      auto tile = matmul::from_bytes(*bytes, rows, cols);
      if (!tile) return tile.error();
      for (std::int64_t r = 0; r < rows; ++r)
        std::copy_n(&tile->data[static_cast<std::size_t>(r * cols)], cols, &c.data[static_cast<std::size_t>((r0 + r) * s->p + c0)]);
      if (auto line = read_file(dir / "stdout", 4096)) {
        auto j = json::parse(*line, nullptr, false);
        if (j.is_object()) compute += number_or(j, "compute_s", 0.0);
      }
    }
    fs::path file = out / "C.npy";
    if (auto w = write_file(file, matmul::encode_npy(c)); !w) return w.error();
    return json{{"matrix", {{"path", fs::absolute(file).string()}, {"rows", s->m}, {"cols", s->p}}},
                {"compute_seconds", compute}};
  }
};

}  // namespace

std::unique_ptr<Workload> make_matmul_workload() { return std::make_unique<MatmulWorkload>(); }

}  // namespace runsnack::pool
