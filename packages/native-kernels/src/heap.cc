#include "heap.h"

napi_value throwRange(napi_env env, const std::string& message) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_range_error(env, "ERR_DDP_KERNEL_ARGS", message.c_str());
  return nullptr;
}

Args::Args(napi_env e, napi_callback_info info, size_t expected) : env(e) {
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < expected) {
    fail("expected " + std::to_string(expected) + " arguments, got " + std::to_string(argc));
    return;
  }
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  bool isTyped = false;
  napi_is_typedarray(env, argv[0], &isTyped);
  if (isTyped) napi_get_typedarray_info(env, argv[0], &type, &length, &data, nullptr, nullptr);
  if (!isTyped || type != napi_uint8_array) {
    fail("the first argument must be the wasm heap (a Uint8Array)");
    return;
  }
  heap = static_cast<uint8_t*>(data);
  heapBytes = length;
}

void Args::fail(const std::string& message) {
  if (!failed) throwRange(env, message);
  failed = true;
}

int64_t Args::integer(size_t i) {
  if (failed) return 0;
  double v = 0;
  bool flag = false;
  if (i < argc && napi_get_value_double(env, argv[i], &v) == napi_ok) return static_cast<int64_t>(v);
  if (i < argc && napi_get_value_bool(env, argv[i], &flag) == napi_ok) return flag;
  fail("argument " + std::to_string(i) + " must be a number or a boolean");
  return 0;
}

float Args::real(size_t i) {
  if (failed) return 0;
  double v = 0;
  if (i < argc && napi_get_value_double(env, argv[i], &v) == napi_ok) return static_cast<float>(v);
  fail("argument " + std::to_string(i) + " must be a number");
  return 0;
}

float* Args::floats(size_t i, int64_t count) {
  int64_t offset = integer(i);
  if (failed) return nullptr;
  if (offset < 0 || offset % 4 != 0 || count < 0 ||
      static_cast<uint64_t>(offset) + static_cast<uint64_t>(count) * 4 > heapBytes) {
    fail("argument " + std::to_string(i) + ": " + std::to_string(count) + " float32 at byte offset " +
         std::to_string(offset) + " do not lie inside the " + std::to_string(heapBytes) + "-byte heap");
    return nullptr;
  }
  return reinterpret_cast<float*>(heap + offset);
}
