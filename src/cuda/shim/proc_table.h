/* The generated cuGetProcAddress table (gen_proc_table.py). C, so the
   generated stubs can be declared with no parameters for any signature. */
#ifndef RUNSNACK_CUDA_SHIM_PROC_TABLE_H
#define RUNSNACK_CUDA_SHIM_PROC_TABLE_H

#ifdef __cplusplus
extern "C" {
#endif

struct runsnack_proc_entry {
  const char* name;     /* the API name, as cuGetProcAddress is asked */
  int version;          /* the CUDA version that introduced this variant */
  int per_thread;       /* 1: the _ptds/_ptsz per-thread-default-stream variant */
  void* address;
};
extern const struct runsnack_proc_entry runsnack_proc_table[];
extern const unsigned runsnack_proc_table_size;

/* Logs (once per name) that `name` has no implementation; aborts under
   RUNSNACK_CUDA_STRICT=1; returns CUDA_ERROR_NOT_SUPPORTED. */
int runsnack_cuda_unimplemented(const char* name);

#ifdef __cplusplus
}
#endif

#endif
