/* A fake NVML for tests: the handful of entry points RunSnack's dlopen
 * loader uses, with NVML's C ABI, reporting two GPUs with fixed numbers.
 * gpu_test loads it through RUNSNACK_NVML_LIBRARY.
 *
 * Environment knobs, read at call time:
 *   FAKE_NVML_FAIL_INIT=1      nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED (9)
 *   FAKE_NVML_DEVICE_COUNT=N   report N devices (default 2, at most 2)
 *   FAKE_NVML_NO_TEMPERATURE=1 nvmlDeviceGetTemperature returns NOT_SUPPORTED (3)
 * fake_nvml_live_inits() tells a test whether every init was shut down. */

#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

struct nvmlDevice_st {
  const char* name;
  const char* uuid;
  unsigned long long total, used;
  unsigned int util, temp;
};

static struct nvmlDevice_st devices[2] = {
    {"Fake GPU 0", "GPU-00000000-fake-0000-0000-000000000000", 80ULL << 30, 1ULL << 30, 7, 41},
    {"Fake GPU 1", "GPU-11111111-fake-1111-1111-111111111111", 24ULL << 30, 3ULL << 30, 93, 67},
};

static int live_inits = 0;

static int env_flag(const char* name) {
  const char* v = getenv(name);
  return v && strcmp(v, "1") == 0;
}

static unsigned device_count(void) {
  const char* v = getenv("FAKE_NVML_DEVICE_COUNT");
  unsigned n = v ? (unsigned)atoi(v) : 2u;
  return n > 2 ? 2 : n;
}

static nvmlReturn_t copy_string(const char* s, char* out, unsigned length) {
  if (!out) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  if (strlen(s) + 1 > length) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  strcpy(out, s);
  return 0;
}

nvmlReturn_t nvmlInit_v2(void) {
  if (env_flag("FAKE_NVML_FAIL_INIT")) return 9;
  ++live_inits;
  return 0;
}

nvmlReturn_t nvmlShutdown(void) {
  --live_inits;
  return 0;
}

int fake_nvml_live_inits(void) { return live_inits; }

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return copy_string("555.42.06", version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 12050;
  return 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = device_count();
  return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= device_count()) return 2;
  *device = &devices[index];
  return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return copy_string(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return copy_string(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  memory->total = device->total;
  memory->used = device->used;
  memory->free = device->total - device->used;
  return 0;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  utilization->gpu = device->util;
  utilization->memory = device->util / 2;
  return 0;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp) {
  if (sensor != 0) return 2; /* only NVML_TEMPERATURE_GPU exists */
  if (env_flag("FAKE_NVML_NO_TEMPERATURE")) return 3;
  *temp = device->temp;
  return 0;
}

/* nvmlProcessInfo_t of the _v2/_v3 entry points. FAKE_NVML_PROCESSES="PID:BYTES,PID:BYTES" lists
 * the compute processes of device 0 (BYTES "na": NVML_VALUE_NOT_AVAILABLE); device 1 has none. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  nvmlProcessInfo_t found[64];
  unsigned n = 0;
  const char* list = getenv("FAKE_NVML_PROCESSES");
  if (device == &devices[0] && list) {
    const char* p = list;
    while (*p && n < 64) {
      char* end = NULL;
      found[n].pid = (unsigned)strtoul(p, &end, 10);
      if (*end != ':') break;
      p = end + 1;
      if (strncmp(p, "na", 2) == 0) {
        found[n].usedGpuMemory = ~0ULL;
        end = (char*)p + 2;
      } else {
        found[n].usedGpuMemory = strtoull(p, &end, 10);
      }
      found[n].gpuInstanceId = found[n].computeInstanceId = ~0U;
      ++n;
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (*count < n) {
    *count = n;
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  *count = n;
  if (n) memcpy(infos, found, n * sizeof found[0]);
  return 0;
}
