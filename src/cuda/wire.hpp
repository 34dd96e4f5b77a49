// The remote CUDA wire format: the frames the driver shim (libcuda.so.1 on
// the consumer) and serve_cuda (on the provider) exchange over one stream.
//   frame = [u32 length][u16 op][u16 flags][u32 seq] payload   (little-endian)
// `length` counts the payload only. A request with kFlagReply set expects one
// Reply frame carrying the same seq; every other request is fire-and-forget
// and its error (if any) is latched by the server and returned by the next
// reply. Plain C++ and POSIX only: the shim links this into a process that
// must not see the rest of RunSnack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::cuda::wire {

inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr std::size_t kHeaderSize = 12;
// Largest payload either side accepts; large copies and module images travel
// as chunks of kChunk bytes, so no legitimate frame comes near it.
inline constexpr std::size_t kChunk = 1u << 20;
inline constexpr std::size_t kMaxPayload = 4u << 20;
// Module images are staged on the server before loading; bound their size.
inline constexpr std::uint64_t kMaxImage = 1ull << 31;
inline constexpr std::uint16_t kFlagReply = 1;

enum class Op : std::uint16_t {
  // server -> client
  Reply = 1,   // [i32 result] op-specific fields
  Output = 2,  // bytes the server-side kernels printed (device printf)
  // synchronous (kFlagReply)
  Hello = 10,  // [u32 version] -> [u32 version][i32 driver][u32 count] count x DeviceInfo
  CtxCreate,   // [u32 flags][i32 dev] -> [u64 ctx]
  PrimaryCtxRetain,  // [i32 dev] -> [u64 ctx]
  CtxSynchronize,    // [u64 ctx]   (requests marked ctx name the context to make current)
  MemAlloc,          // [u64 ctx][u64 size] -> [u64 dptr]
  MemGetInfo,        // [u64 ctx] -> [u64 free][u64 total]
  MemcpyDtoH,        // [u64 ctx][u64 src][u64 size][u64 stream] -> [bytes]
  ImageBegin,        // [u64 size]   then ImageChunk frames, then a *Load op
  ModuleLoad,        // [u64 ctx] -> [u64 module]   (uses the staged image)
  ModuleGetFunction,  // [u64 module][str name] -> [u64 fn] ParamInfo
  ModuleGetGlobal,    // [u64 module][str name] -> [u64 dptr][u64 size]
  LibraryLoad,        // -> [u64 library]   (uses the staged image)
  LibraryGetKernel,   // [u64 library][str name] -> [u64 kernel] ParamInfo
  LibraryGetGlobal,   // [u64 ctx][u64 library][str name] -> [u64 dptr][u64 size]
  KernelGetFunction,  // [u64 ctx][u64 kernel] -> [u64 fn]
  FuncGetAttribute,   // [u64 fn][i32 attrib] -> [i32 value]
  StreamCreate,       // [u64 ctx][u32 flags][i32 priority] -> [u64 stream]
  StreamSynchronize,  // [u64 ctx][u64 stream]
  StreamQuery,        // [u64 ctx][u64 stream]
  EventCreate,        // [u64 ctx][u32 flags] -> [u64 event]
  EventSynchronize,   // [u64 event]
  EventQuery,         // [u64 event]
  EventElapsedTime,   // [u64 start][u64 end] -> [f32 ms]
  Occupancy,          // [u64 fn][i32 block size][u64 dynamic smem][u32 flags] -> [i32 blocks per SM]
  OccupancyClusters,  // [u64 fn][u32 grid xyz][u32 block xyz][u32 smem][u32 cluster xyz] -> [i32 clusters]
  Sync,               // nothing: returns the latched error (flush barrier)
  // fire-and-forget
  CtxDestroy = 100,   // [u64 ctx]
  PrimaryCtxRelease,  // [i32 dev]
  MemFree,            // [u64 dptr]
  MemcpyHtoD,         // [u64 ctx][u64 dst][u64 stream][bytes]   (one chunk)
  MemcpyDtoD,         // [u64 ctx][u64 dst][u64 src][u64 size][u64 stream]
  Memset,             // [u64 ctx][u64 dst][u32 value][u32 elem][u64 count][u64 stream]
  ImageChunk,         // [bytes]
  ModuleUnload,       // [u64 module]
  LibraryUnload,      // [u64 library]
  FuncSetAttribute,   // [u64 fn][i32 attrib][i32 value]
  Launch,             // [u64 ctx][u64 fn][u32 grid xyz][u32 block xyz][u32 shmem][u64 stream][bytes params]
  StreamDestroy,      // [u64 stream]
  StreamWaitEvent,    // [u64 ctx][u64 stream][u64 event][u32 flags]
  EventRecord,        // [u64 ctx][u64 event][u64 stream]
  EventDestroy,       // [u64 event]
};

bool is_known_op(std::uint16_t op);
const char* op_name(Op op);

struct Header {
  std::uint32_t length = 0;
  Op op{};
  std::uint16_t flags = 0;
  std::uint32_t seq = 0;
};

// Decodes a header; returns an error message (empty when fine) so a bad frame
// closes the connection with a reason rather than a crash.
std::string decode_header(const std::uint8_t* p, Header& h);
void encode_header(const Header& h, std::uint8_t* p);

// Appends little-endian values; `frame` starts one frame and `finish` fills in
// its length, so many frames can share one buffer (client-side coalescing).
class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}
  void frame(Op op, std::uint16_t flags, std::uint32_t seq);
  void finish();
  void u16(std::uint16_t v) { put(&v, 2); }
  void u32(std::uint32_t v) { put(&v, 4); }
  void i32(std::int32_t v) { put(&v, 4); }
  void u64(std::uint64_t v) { put(&v, 8); }
  void f32(float v) { put(&v, 4); }
  void str(std::string_view s);                      // [u32 n][n bytes]
  void bytes(const void* p, std::size_t n);           // [u32 n][n bytes]
  void raw(const void* p, std::size_t n) { put(p, n); }  // rest of the frame
  template <class T>
  void array(const std::vector<T>& v) {  // [u32 n][n x T] for trivially copyable T
    u32(static_cast<std::uint32_t>(v.size()));
    put(v.data(), v.size() * sizeof(T));
  }

 private:
  void put(const void* p, std::size_t n);  // the host is little-endian (static_assert in wire.cpp)
  std::vector<std::uint8_t>& out_;
  std::size_t start_ = 0;
  bool open_ = false;
};

// Reads a payload; any read past the end sets failed() and yields zeros, so a
// handler reads all fields then checks once.
class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::uint16_t u16() { return get<std::uint16_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::int32_t i32() { return get<std::int32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  float f32() { return get<float>(); }
  std::string str();
  // A [u32 n][n bytes] field as a view into the payload.
  std::string_view bytes();
  std::string_view rest();
  void raw(void* out, std::size_t n);  // exactly n bytes, no length prefix
  template <class T>
  std::vector<T> array(std::size_t max_count) {
    std::uint32_t n = u32();
    if (failed_ || n > max_count || n * sizeof(T) > n_ - off_) {
      failed_ = true;
      return {};
    }
    std::vector<T> v(n);
    std::memcpy(v.data(), p_ + off_, n * sizeof(T));
    off_ += n * sizeof(T);
    return v;
  }
  bool failed() const { return failed_; }
  bool at_end() const { return off_ == n_; }

 private:
  template <class T>
  T get() {
    T v{};
    if (failed_ || n_ - off_ < sizeof(T)) {
      failed_ = true;
      return v;
    }
    std::memcpy(&v, p_ + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t off_ = 0;
  bool failed_ = false;
};

// One device as the server describes it at Hello; the client answers every
// device query from this copy without a round trip.
struct DeviceInfo {
  std::string name;
  std::uint8_t uuid[16]{};
  std::uint64_t total_mem = 0;
  std::vector<std::int32_t> attributes;  // index = CUdevice_attribute value
};
inline constexpr std::size_t kMaxAttributes = 1024;
void write_device(Writer& w, const DeviceInfo& d);
DeviceInfo read_device(Reader& r);

// A kernel's parameter layout, from cuFuncGetParamInfo on the server.
struct Param {
  std::uint32_t offset = 0;
  std::uint32_t size = 0;
};
inline constexpr std::size_t kMaxParams = 4096;

// The size of a module image the driver would accept at `p`: a fatbin (magic
// 0xBA55ED50: header size + fat size), the 0x466243B1 wrapper around one, an
// ELF cubin (end of its section/program header tables and sections) or PTX
// text (up to the terminating NUL). 0 when `p` is none of these.
std::size_t image_size(const void* p);
// When `p` is the 0x466243B1 wrapper, the fatbin inside it; else `p`.
const void* unwrap_fatbin(const void* p);

}  // namespace runsnack::cuda::wire
