#include "cuda/wire.hpp"

#include <elf.h>

#include <algorithm>
#include <bit>

namespace runsnack::cuda::wire {

static_assert(std::endian::native == std::endian::little, "the wire format is the host's byte order");

bool is_known_op(std::uint16_t op) {
  return (op >= 1 && op <= 2) || (op >= static_cast<std::uint16_t>(Op::Hello) && op <= static_cast<std::uint16_t>(Op::Sync)) ||
         (op >= static_cast<std::uint16_t>(Op::CtxDestroy) && op <= static_cast<std::uint16_t>(Op::EventDestroy));
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Reply: return "Reply";
    case Op::Output: return "Output";
    case Op::Hello: return "Hello";
    case Op::CtxCreate: return "CtxCreate";
    case Op::PrimaryCtxRetain: return "PrimaryCtxRetain";
    case Op::CtxSynchronize: return "CtxSynchronize";
    case Op::MemAlloc: return "MemAlloc";
    case Op::MemGetInfo: return "MemGetInfo";
    case Op::MemcpyDtoH: return "MemcpyDtoH";
    case Op::ImageBegin: return "ImageBegin";
    case Op::ModuleLoad: return "ModuleLoad";
    case Op::ModuleGetFunction: return "ModuleGetFunction";
    case Op::ModuleGetGlobal: return "ModuleGetGlobal";
    case Op::LibraryLoad: return "LibraryLoad";
    case Op::LibraryGetKernel: return "LibraryGetKernel";
    case Op::LibraryGetGlobal: return "LibraryGetGlobal";
    case Op::KernelGetFunction: return "KernelGetFunction";
    case Op::FuncGetAttribute: return "FuncGetAttribute";
    case Op::StreamCreate: return "StreamCreate";
    case Op::StreamSynchronize: return "StreamSynchronize";
    case Op::StreamQuery: return "StreamQuery";
    case Op::EventCreate: return "EventCreate";
    case Op::EventSynchronize: return "EventSynchronize";
    case Op::EventQuery: return "EventQuery";
    case Op::EventElapsedTime: return "EventElapsedTime";
    case Op::Occupancy: return "Occupancy";
    case Op::OccupancyClusters: return "OccupancyClusters";
    case Op::Sync: return "Sync";
    case Op::CtxDestroy: return "CtxDestroy";
    case Op::PrimaryCtxRelease: return "PrimaryCtxRelease";
    case Op::MemFree: return "MemFree";
    case Op::MemcpyHtoD: return "MemcpyHtoD";
    case Op::MemcpyDtoD: return "MemcpyDtoD";
    case Op::Memset: return "Memset";
    case Op::ImageChunk: return "ImageChunk";
    case Op::ModuleUnload: return "ModuleUnload";
    case Op::LibraryUnload: return "LibraryUnload";
    case Op::FuncSetAttribute: return "FuncSetAttribute";
    case Op::Launch: return "Launch";
    case Op::StreamDestroy: return "StreamDestroy";
    case Op::StreamWaitEvent: return "StreamWaitEvent";
    case Op::EventRecord: return "EventRecord";
    case Op::EventDestroy: return "EventDestroy";
  }
  return "?";
}

std::string decode_header(const std::uint8_t* p, Header& h) {
  std::uint16_t op = 0;
  std::memcpy(&h.length, p, 4);
  std::memcpy(&op, p + 4, 2);
  std::memcpy(&h.flags, p + 6, 2);
  std::memcpy(&h.seq, p + 8, 4);
  if (h.length > kMaxPayload) {
    return "cuda wire: frame of " + std::to_string(h.length) + " bytes exceeds the limit of " +
           std::to_string(kMaxPayload);
  }
  if (!is_known_op(op)) return "cuda wire: unknown op " + std::to_string(op);
  if (h.flags & ~kFlagReply) return "cuda wire: unknown flags " + std::to_string(h.flags);
  h.op = static_cast<Op>(op);
  return {};
}

void encode_header(const Header& h, std::uint8_t* p) {
  auto op = static_cast<std::uint16_t>(h.op);
  std::memcpy(p, &h.length, 4);
  std::memcpy(p + 4, &op, 2);
  std::memcpy(p + 6, &h.flags, 2);
  std::memcpy(p + 8, &h.seq, 4);
}

void Writer::frame(Op op, std::uint16_t flags, std::uint32_t seq) {
  start_ = out_.size();
  open_ = true;
  out_.resize(start_ + kHeaderSize);
  encode_header(Header{0, op, flags, seq}, out_.data() + start_);
}

void Writer::finish() {
  if (!open_) return;
  auto len = static_cast<std::uint32_t>(out_.size() - start_ - kHeaderSize);
  std::memcpy(out_.data() + start_, &len, 4);
  open_ = false;
}

void Writer::put(const void* p, std::size_t n) {
  if (n == 0) return;
  auto* b = static_cast<const std::uint8_t*>(p);
  out_.insert(out_.end(), b, b + n);
}

void Writer::str(std::string_view s) { bytes(s.data(), s.size()); }

void Writer::bytes(const void* p, std::size_t n) {
  u32(static_cast<std::uint32_t>(n));
  put(p, n);
}

std::string Reader::str() { return std::string(bytes()); }

std::string_view Reader::bytes() {
  std::uint32_t n = u32();
  if (failed_ || n > n_ - off_) {
    failed_ = true;
    return {};
  }
  std::string_view v(reinterpret_cast<const char*>(p_ + off_), n);
  off_ += n;
  return v;
}

void Reader::raw(void* out, std::size_t n) {
  if (failed_ || n > n_ - off_) {
    failed_ = true;
    std::memset(out, 0, n);
    return;
  }
  std::memcpy(out, p_ + off_, n);
  off_ += n;
}

std::string_view Reader::rest() {
  std::string_view v(reinterpret_cast<const char*>(p_ + off_), n_ - off_);
  off_ = n_;
  return v;
}

void write_device(Writer& w, const DeviceInfo& d) {
  w.str(d.name);
  w.raw(d.uuid, 16);
  w.u64(d.total_mem);
  w.array(d.attributes);
}

DeviceInfo read_device(Reader& r) {
  DeviceInfo d;
  d.name = r.str();
  r.raw(d.uuid, 16);
  d.total_mem = r.u64();
  d.attributes = r.array<std::int32_t>(kMaxAttributes);
  return d;
}

namespace {
constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
constexpr std::uint32_t kWrapperMagic = 0x466243B1;

struct FatbinHeader {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t header_size;
  std::uint64_t fat_size;
};
struct FatbinWrapper {
  std::int32_t magic;
  std::int32_t version;
  const void* data;
  const void* filename_or_fatbins;
};

std::size_t elf_size(const std::uint8_t* p) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, p, sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return 0;
  std::size_t end = sizeof eh;
  end = std::max<std::size_t>(end, eh.e_phoff + std::size_t{eh.e_phnum} * eh.e_phentsize);
  end = std::max<std::size_t>(end, eh.e_shoff + std::size_t{eh.e_shnum} * eh.e_shentsize);
  if (eh.e_shentsize == sizeof(Elf64_Shdr)) {
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
      Elf64_Shdr sh;
      std::memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
      if (sh.sh_type != SHT_NOBITS) end = std::max<std::size_t>(end, sh.sh_offset + sh.sh_size);
    }
  }
  return end;
}
}  // namespace

const void* unwrap_fatbin(const void* p) {
  if (p == nullptr) return p;
  std::uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic != kWrapperMagic) return p;
  FatbinWrapper w;
  std::memcpy(&w, p, sizeof w);
  return w.data;
}

std::size_t image_size(const void* image) {
  if (image == nullptr) return 0;
  auto* p = static_cast<const std::uint8_t*>(unwrap_fatbin(image));
  if (p == nullptr) return 0;
  std::uint32_t magic;
  std::memcpy(&magic, p, 4);
  if (magic == kFatbinMagic) {
    FatbinHeader h;
    std::memcpy(&h, p, sizeof h);
    return std::size_t{h.header_size} + h.fat_size;
  }
  if (std::memcmp(p, ELFMAG, SELFMAG) == 0) return elf_size(p);
  // PTX source is text; the driver reads it up to its NUL.
  if (p[0] == '/' || p[0] == '.' || p[0] == '\n' || p[0] == ' ' || p[0] == '\t') {
    return std::strlen(reinterpret_cast<const char*>(p)) + 1;
  }
  return 0;
}

}  // namespace runsnack::cuda::wire
