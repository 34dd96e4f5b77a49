// Queries NVML the way monitoring tools do (dlopen, no headers): device
// count, name, UUID, memory. Run through the shim, it sees the remote GPU.
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (lib == nullptr) {
    std::printf("dlopen: %s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
  auto uuid = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetUUID"));
  struct Memory {
    unsigned long long total, free, used;
  } mem{};
  auto memory = reinterpret_cast<int (*)(void*, Memory*)>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  unsigned n = 0;
  void* dev = nullptr;
  char buf[96] = {}, id[96] = {};
  int rc = init();
  if (rc == 0) rc = count(&n);
  if (rc == 0 && n > 0) rc = handle(0, &dev);
  if (rc == 0) rc = name(dev, buf, sizeof buf);
  if (rc == 0) rc = uuid(dev, id, sizeof id);
  if (rc == 0) rc = memory(dev, &mem);
  std::printf("nvml rc %d count %u name %s uuid %s total %llu\n", rc, n, buf, id, mem.total);
  return rc == 0 ? 0 : 1;
}
